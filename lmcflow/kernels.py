"""Which CPU kernels a run's arithmetic uses, so that its bits do not depend on the machine.

PyTorch, MKL and oneDNN each pick their kernels by the CPU they find (AVX2, AVX-512, AMX), and
kernels of different widths round differently: a last-bit difference that SGD turns into a
different model within an epoch. ``portable`` holds all three to their AVX2 paths, which every
x86-64 CPU since 2013-2015 runs, so one config gives the same bits on every such machine;
``native`` lets each library use the machine's widest kernels. The holding is done by
environment variables that the libraries read once, so it must happen before torch is imported:
the workflow puts ``kernel_env`` into the environment its jobs inherit
(``workflow/rules/common.smk``), and each torch job checks what it got (``check``).

No torch import here: the workflow and the torch-free jobs use this module too. Scope and limits
are in docs/reproducibility.md.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import logging
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

from lmcflow.errors import ConfigError

log = logging.getLogger(__name__)

MODES = ("portable", "native", "vendor_neutral")
MODE_VAR = "LMCFLOW_CPU_KERNELS"  # the mode the workflow chose, for the jobs to check and record
# Set (never setdefault) in portable mode: a user's own setting of any of these must not change the
# bits of a portable run. MKL_CBWR's STRICT also makes MKL's GEMM independent of its thread count.
PORTABLE_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",        # PyTorch's own kernels (softmax, reductions, elementwise)
    "MKL_CBWR": "AVX2,STRICT",            # MKL's conditional numerical reproducibility branch
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",    # MKL's dispatch ceiling (what CBWR leaves open)
    "ONEDNN_MAX_CPU_ISA": "AVX2",         # oneDNN (convolutions, bf16 matmuls): no AVX-512, no AMX
    "OPENBLAS_CORETYPE": "Haswell",       # numpy's and scipy's OpenBLAS: its AVX2 kernels
    "OMP_DYNAMIC": "FALSE",               # OpenMP may not hand a parallel region fewer threads than asked
    "MKL_DYNAMIC": "FALSE",
}
PORTABLE_CAPABILITY = "AVX2"  # what torch.backends.cpu.get_cpu_capability() reports when held
# vendor_neutral: kernels that do not depend on the CPU's vendor either. MKL's COMPATIBLE branch is the one MKL
# documents as giving the same results on Intel and non-Intel (AMD) processors (it is what MKL picks no kernel
# by vendor in); PyTorch's own kernels run their generic build ("DEFAULT": compiled for baseline x86-64, no
# runtime dispatch), oneDNN its SSE4.1 JIT, OpenBLAS its Prescott (SSE3) kernels, numpy its baseline loops.
# MKL_ENABLE_INSTRUCTIONS is left alone: under COMPATIBLE it changes nothing (tests/test_portable_bits.py).
VENDOR_NEUTRAL_ENV = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OPENBLAS_CORETYPE": "Prescott",
    "OMP_DYNAMIC": "FALSE",
    "MKL_DYNAMIC": "FALSE",
}
VENDOR_NEUTRAL_CAPABILITY = "DEFAULT"
HELD_ENV = {"portable": PORTABLE_ENV, "vendor_neutral": VENDOR_NEUTRAL_ENV}
HELD_CAPABILITY = {"portable": PORTABLE_CAPABILITY, "vendor_neutral": VENDOR_NEUTRAL_CAPABILITY}
SIMD_FLAGS = ("avx2", "avx512f", "amx_tile")


class KernelError(ConfigError):
    """The requested kernel mode cannot hold in this process or on this CPU."""


@functools.cache
def cpu_info() -> dict:
    """CPU model, vendor, architecture and the SIMD flags that decide the kernels (from /proc/cpuinfo). The vendor
    (``GenuineIntel``, ``AuthenticAMD``) matters because MKL picks its GEMM kernels by vendor as well as by
    instruction set, so portable bits are per vendor (docs/reproducibility.md)."""
    model, vendor, flags = None, None, set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "Model") and model is None:
                model = value.strip()
            elif key == "vendor_id" and vendor is None:
                vendor = value.strip()
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
    return {"model": model or None, "vendor": vendor, "arch": platform.machine(),
            "simd": [f for f in SIMD_FLAGS if f in flags]}


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def kernel_env(mode: str) -> dict[str, str]:
    """The environment variables that put a process's CPU kernels in ``mode`` (``portable`` | ``native``).

    ``native`` sets only the mode marker: the libraries choose by the CPU and by whatever the user's
    environment says. ``portable`` off x86-64 is not defined (no AVX2 to hold to): it warns and runs
    native, and the marker says ``native`` so that the outputs do not claim otherwise.
    """
    if mode not in MODES:
        raise KernelError(f"cpu_kernels: {mode!r} is not one of {', '.join(MODES)}")
    if mode == "native":
        return {MODE_VAR: "native"}
    if not is_x86_64():
        log.warning(f"cpu_kernels: {mode} holds x86-64 CPUs to fixed kernels; this is {platform.machine()}, "
                    "so the run uses its native kernels (recorded as cpu_kernels=native)")
        return {MODE_VAR: "native"}
    if mode == "vendor_neutral":
        numpy_off = _numpy_above("baseline")
        return {MODE_VAR: mode, **VENDOR_NEUTRAL_ENV, **({"NPY_DISABLE_CPU_FEATURES": numpy_off} if numpy_off else {})}
    if "avx2" not in cpu_info()["simd"]:
        raise KernelError(f"cpu_kernels: portable needs a CPU with AVX2, and this one "
                          f"({cpu_info()['model']}) has none; set cpu_kernels: native or vendor_neutral")
    numpy_off = _numpy_above("avx2")
    return {MODE_VAR: "portable", **PORTABLE_ENV, **({"NPY_DISABLE_CPU_FEATURES": numpy_off} if numpy_off else {})}


_NUMPY_PROBE = """
import sys
try:
    from numpy._core import _multiarray_umath as m
except ImportError:  # numpy < 2
    from numpy.core import _multiarray_umath as m
d, f, base = m.__cpu_dispatch__, m.__cpu_features__, set(m.__cpu_baseline__)
if sys.argv[1] == "avx2":
    print(" ".join(t for t in d if ("AVX512" in t or t == "X86_V4") and f.get(t)))
else:
    print(" ".join(t for t in d if t not in base and f.get(t)))
"""


@functools.cache
def _numpy_above(level: str) -> str:
    """numpy's own SIMD loops this CPU would run above ``level`` (``avx2``: its AVX-512 targets; ``baseline``:
    every target past the baseline numpy was built for), as ``NPY_DISABLE_CPU_FEATURES`` names them. Read from
    this numpy, since numpy refuses names it does not know; in a fresh Python, since numpy reads the variable
    when imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPY_")}
    res = subprocess.run([sys.executable, "-c", _NUMPY_PROBE, level], env=env, capture_output=True, text=True,
                         timeout=120)
    if res.returncode != 0:
        raise KernelError(f"cpu_kernels: cannot read numpy's CPU dispatch targets: {res.stderr.strip()[-500:]}")
    return res.stdout.strip()


def apply(mode: str) -> dict[str, str]:
    """Put ``kernel_env(mode)`` into ``os.environ`` of this process (and so of its children).

    The libraries read these variables once, when loaded, so a change after ``import torch`` (or
    numpy, for its own variables) might not reach them: then any variable that would change is refused.
    """
    loaded = [m for m in ("torch", "numpy") if m in sys.modules]
    env = kernel_env(mode)
    changed = sorted(k for k, v in env.items() if k != MODE_VAR and os.environ.get(k) != v)
    if changed and loaded:
        raise KernelError(f"cpu_kernels: {mode} needs {', '.join(changed)} set before this process imports "
                          f"{' and '.join(loaded)}, which it has done; set them in the environment that starts "
                          "Python (lmcflow.kernels.kernel_env)")
    os.environ.update(env)
    return env


def requested() -> str:
    """The mode this process's environment asks for (``native`` when no workflow set one)."""
    return os.environ.get(MODE_VAR, "native")


def fused_adamw() -> bool:
    """Whether AdamW runs PyTorch's fused CPU kernel: in ``vendor_neutral`` mode only. The default (foreach) AdamW
    takes the square root of its second moment with MKL's vector math (``vsSqrt``), which is within an ulp
    rather than correctly rounded, and rounds differently on Intel and AMD whatever ``MKL_CBWR`` says
    (``tests/data/vendor_probe.py``); the fused kernel takes it with the CPU's IEEE square root. The other modes
    keep the default, with which their recorded bits were made."""
    return requested() == "vendor_neutral"


def dispatched() -> str:
    """The ISA PyTorch's CPU kernels run with here (``AVX2``, ``AVX512``, ``DEFAULT``, ``SVE256``, ...)."""
    import torch  # heavy; the workflow imports this module before any job picks its kernels

    return torch.backends.cpu.get_cpu_capability()


def check() -> dict[str, str]:
    """In a torch job: the requested mode and the ISA actually dispatched, the ``runs`` columns
    ``cpu_kernels`` and ``cpu_capability``. Fails loudly where portable mode does not hold."""
    mode, isa = requested(), dispatched()
    if mode in HELD_ENV:
        wrong = {k: os.environ.get(k) for k, v in HELD_ENV[mode].items() if os.environ.get(k) != v}
        if wrong or isa != HELD_CAPABILITY[mode]:
            raise KernelError(f"cpu_kernels: {mode} asked for {HELD_CAPABILITY[mode]} kernels, but this job "
                              f"dispatches {isa} (environment differs in {wrong or 'nothing'}); the job's "
                              "environment must come from the workflow (lmcflow.kernels.kernel_env)")
    return {"cpu_kernels": mode, "cpu_capability": isa}


def set_threads(n: int) -> None:
    """Intra-op threads (PyTorch's and MKL's) as the config says, never as many as the machine has:
    how a reduction is split over threads decides its rounding. One inter-op thread."""
    import torch  # heavy; the workflow imports this module before any job picks its kernels

    n = max(1, int(n))
    if n > (os.cpu_count() or n):
        log.warning(f"threads: {n} per job but this machine has {os.cpu_count()} CPUs; running {n} anyway, "
                    "since the thread count is part of what decides the bits")
    torch.set_num_threads(n)
    if torch.get_num_interop_threads() != 1:
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # inter-op parallelism already started in this process; it splits no reduction
            pass


# glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_MAX
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4


def keep_freed_memory() -> bool:
    """Serve large tensors from the heap and keep freed memory for reuse (glibc only; False elsewhere).

    By default glibc maps every allocation above its mmap threshold afresh and unmaps it on free, so a wide
    model's training step maps and zeroes the same memory again each step: ~30,000 page faults and ~90 ms of
    kernel time per ×8 MLP step (docs/performance.md). Allocation only, never arithmetic: no bit changes."""
    name = ctypes.util.find_library("c")
    if not name or platform.system() != "Linux":
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2 ** 31 - 1))
    except (OSError, AttributeError):  # not glibc
        return False


def start_job(threads: int) -> dict[str, str]:
    """First thing in a torch job: the allocator setting (``keep_freed_memory``), the job's thread count and the
    kernel check (``check``)."""
    keep_freed_memory()
    set_threads(threads)
    return check()


_BUILD_PATTERNS = {
    "mkl_version": r"Math Kernel Library Version ([0-9.]+)",
    "onednn_version": r"MKL-DNN v([^\s]+)",
    "openmp_version": r"OpenMP (\d+)",
    "torch_blas": r"BLAS_INFO=([^,\s]+)",
}

_PROBE = ("import json, torch; print(json.dumps({'config': torch.__config__.show(), "
          "'capability': torch.backends.cpu.get_cpu_capability()}))")


@functools.cache
def torch_build() -> dict:
    """The math libraries torch was built with and the ISA it dispatches under this process's
    environment, asked of a fresh Python (torch-free callers stay torch-free)."""
    try:
        res = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300,
                             check=True)
        facts = json.loads(res.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as err:
        log.warning(f"torch build facts unknown ({err})")
        return {k: None for k in [*_BUILD_PATTERNS, "cpu_capability"]}
    found = {k: re.search(p, facts["config"]) for k, p in _BUILD_PATTERNS.items()}
    return {**{k: m.group(1) if m else None for k, m in found.items()}, "cpu_capability": facts["capability"]}
