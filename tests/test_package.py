"""lmcflow is a regular package, and a workflow's jobs import the lmcflow of the checkout that runs it."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import lmcflow

REPO = Path(__file__).resolve().parents[1]


def test_lmcflow_is_a_regular_package():
    assert lmcflow.__file__ is not None and Path(lmcflow.__file__).name == "__init__.py"
    assert lmcflow.__version__


def clone(dst: Path, version: str) -> Path:
    """A copy of the checkout's workflow and package whose ``lmcflow.__version__`` is ``version``."""
    dst.mkdir()
    for name in ("Snakefile", "workflow", "lmcflow", "config"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst / name)
    init = dst / "lmcflow/__init__.py"
    text = init.read_text()
    init.write_text(text.replace(f'__version__ = "{lmcflow.__version__}"', f'__version__ = "{version}"'))
    assert f'"{version}"' in init.read_text()
    return dst


def job_package_line(checkout: Path, workdir: Path, other: Path) -> str:
    """Run one job (data preparation of a tiny config) from ``checkout`` with ``other`` first on PYTHONPATH."""
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    env = {**os.environ, "PYTHONPATH": str(other)}  # the other clone, as an editable install of it would be
    res = subprocess.run([snakemake, "--snakefile", str(checkout / "Snakefile"), "--directory", str(workdir),
                          "--configfile", str(REPO / "tests/configs/tiny.yaml"), "--cores", "1",
                          "work/data/fashion_mnist.safetensors"], capture_output=True, text=True, env=env,
                         timeout=600, check=False)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    log = (workdir / "logs/prepare_data/fashion_mnist.log").read_text()
    [line] = [x for x in log.splitlines() if "[job] lmcflow " in x]
    return line


@pytest.mark.slow
@pytest.mark.fmnist
def test_jobs_import_the_checkout_that_runs_the_workflow(tmp_path):
    a = clone(tmp_path / "clone_a", "0.0.0+clone-a")
    b = clone(tmp_path / "clone_b", "0.0.0+clone-b")
    line_b = job_package_line(b, tmp_path / "run_b", other=a)
    assert line_b.endswith(f"[job] lmcflow 0.0.0+clone-b from {b / 'lmcflow'}"), line_b
    line_a = job_package_line(a, tmp_path / "run_a", other=b)
    assert line_a.endswith(f"[job] lmcflow 0.0.0+clone-a from {a / 'lmcflow'}"), line_a
