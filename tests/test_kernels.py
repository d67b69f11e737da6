"""lmcflow.kernels: the environment of each kernel mode, and the refusals where a mode cannot hold."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmcflow import kernels
from lmcflow.config import ConfigError

REPO = Path(__file__).resolve().parents[1]
x86_only = pytest.mark.skipif(not kernels.is_x86_64(), reason="portable kernels are defined on x86-64")


def python(code: str, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python whose environment is this one, minus the kernel variables, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in kernels.PORTABLE_ENV and k != kernels.MODE_VAR}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**base, "PYTHONPATH": str(REPO), **env})


def test_unknown_mode_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match="cpu_kernels: 'fast' is not one of portable, native"):
        kernels.kernel_env("fast")


def test_native_holds_nothing():
    assert kernels.kernel_env("native") == {kernels.MODE_VAR: "native"}


@x86_only
def test_portable_sets_every_library_whatever_the_environment_says(monkeypatch):
    for k in kernels.PORTABLE_ENV:
        monkeypatch.setenv(k, "SOMETHING_ELSE")
    env = kernels.kernel_env("portable")
    assert {k: env[k] for k in kernels.PORTABLE_ENV} == kernels.PORTABLE_ENV
    assert env[kernels.MODE_VAR] == "portable"


def test_cpu_info_reads_the_simd_flags():
    info = kernels.cpu_info()
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    assert info["simd"] == [f for f in kernels.SIMD_FLAGS if f in flags.split()]
    assert info["arch"] and (info["model"] or not flags)


@x86_only
def test_a_portable_job_dispatches_avx2_and_records_it():
    res = python("from lmcflow import kernels; kernels.apply('portable'); import torch; print(kernels.check())")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "{'cpu_kernels': 'portable', 'cpu_capability': 'AVX2'}"


@x86_only
def test_a_job_whose_environment_does_not_hold_fails_loudly():
    """A job told portable whose environment was changed on the way (here: PyTorch's dispatch) refuses to run."""
    env = {**kernels.kernel_env("portable"), "ATEN_CPU_CAPABILITY": "default"}
    res = python("from lmcflow import kernels; import torch; kernels.check()", **env)
    assert res.returncode != 0 and "KernelError" in res.stderr and "ATEN_CPU_CAPABILITY" in res.stderr


@x86_only
def test_apply_after_torch_is_imported_refuses():
    res = python("import torch; from lmcflow import kernels; kernels.apply('portable')")
    assert res.returncode != 0 and "before this process imports torch" in res.stderr
    ok = python("import torch; from lmcflow import kernels; kernels.apply('native'); print(kernels.requested())")
    assert ok.returncode == 0 and ok.stdout.strip() == "native"


def test_threads_come_from_the_config():
    res = python("import torch; from lmcflow import kernels; kernels.set_threads(3); "
                 "print(torch.get_num_threads(), torch.get_num_interop_threads())")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["3", "1"]


def test_torch_jobs_keep_freed_memory_on_glibc():
    """start_job sets glibc's allocator to keep freed memory (mallopt succeeds: glibc returns 1)."""
    import platform

    res = python("from lmcflow import kernels; print(kernels.keep_freed_memory())")
    assert res.returncode == 0, res.stderr
    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert res.stdout.strip() == str(expected)
