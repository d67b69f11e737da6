"""Where a result came from: the lmcflow code, the torch build and the hardware that made it.

Claim JSONs and ``results/provenance.json`` record it (``lmcflow.jobs.report``). No torch import:
the claim jobs that call this are torch-free, so torch's version comes from the installed package's
metadata. Nothing here is a time or a host name, so two runs of one config with one checkout on one
machine record the same provenance and their files stay byte-identical.
"""
from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import logging
import subprocess
from pathlib import Path

import pandas as pd

import lmcflow
from lmcflow import kernels

log = logging.getLogger(__name__)

CHECKOUT = Path(lmcflow.__file__).resolve().parents[1]


@functools.cache
def code_version() -> dict:
    """Package version, and the git commit of the checkout (None when lmcflow is not run from one).

    ``lmcflow_tree_dirty``: tracked files differ from that commit, so the commit alone does not
    name the code that ran (untracked files such as results/ do not count).
    """
    commit = dirty = None
    # .git is a folder in a clone and a file in a worktree; an installed package has neither, and
    # asking git there could name an unrelated repository that happens to hold the environment.
    if (CHECKOUT / ".git").exists():
        try:
            commit = _git("rev-parse", "HEAD")
            dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
        except (OSError, subprocess.SubprocessError) as err:
            log.warning(f"git commit of {CHECKOUT} unknown ({err}); recording the package version only")
            commit = dirty = None
    return {"lmcflow_version": lmcflow.__version__, "lmcflow_commit": commit, "lmcflow_tree_dirty": dirty}


def _git(*args: str) -> str:
    res = subprocess.run(["git", "--no-optional-locks", "-C", str(CHECKOUT), *args], capture_output=True,
                         text=True, timeout=60, check=True)
    return res.stdout.strip()


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def torch_version() -> str | None:
    """``torch.__version__`` without importing torch: its build tag (``+cu130``, ``+cpu``) names the
    CUDA build, which the package metadata's version leaves out."""
    spec = importlib.util.find_spec("torch")  # finds a top-level package without importing it
    version_py = Path(spec.origin).with_name("version.py") if spec and spec.origin else None
    if version_py is not None and version_py.is_file():
        for node in ast.parse(version_py.read_text()).body:
            if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
                    and isinstance(node.value, ast.Constant)):
                return str(node.value.value)
    return package_version("torch")


def provenance(runs: pd.DataFrame) -> dict:
    """Code and torch versions, and the devices, precisions, CPU kernel modes and dispatched ISAs of
    the trained models in ``runs``, and the thread counts they trained with (every claim JSON records this)."""
    return {**code_version(), "torch_version": torch_version(),
            **{c: sorted(set(runs[c].astype(str))) for c in ("device", "precision", "cpu_kernels", "cpu_capability")},
            "train_threads": sorted({int(n) for n in runs["train_threads"]})}


def machine_provenance() -> dict:
    """torch's math libraries and the CPU this runs on: model,
    architecture and the SIMD flags that decide kernels (``lmcflow.kernels``). Asks a fresh Python
    about torch's build, so only ``results/provenance.json`` pays for it."""
    build = {k: v for k, v in kernels.torch_build().items() if k != "cpu_capability"}
    cpu = kernels.cpu_info()
    return {**build, "cpu_model": cpu["model"], "cpu_arch": cpu["arch"], "cpu_simd": cpu["simd"]}
