import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
FMNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    if not FMNIST_DIR.is_dir():
        skip = pytest.mark.skip(reason="Debian package dataset-fashion-mnist is not installed")
        for item in items:
            if "fmnist" in item.keywords:
                item.add_marker(skip)


def run_snakemake(configfile, workdir, *args, timeout=900) -> str:
    """The workflow on ``configfile`` in ``workdir`` (2 cores); fails the test with the log's tail."""
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--snakefile", str(REPO / "Snakefile"),
           "--configfile", str(configfile), "--directory", str(workdir), "--cores", "2", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout + res.stderr


@pytest.fixture(scope="session")
def fmnist_path(tmp_path_factory):
    """The real Fashion-MNIST, prepared once per test session."""
    from lmcflow.data import prepare_dataset

    root = tmp_path_factory.mktemp("fmnist")
    out = root / "fashion_mnist.safetensors"
    prepare_dataset("fashion_mnist", {"search_paths": [str(FMNIST_DIR)], "download": False,
                                      "val_size": 5000, "split_seed": 0}, out, root / "raw")
    return out


@pytest.fixture
def small_data():
    """A small synthetic classification Dataset (in memory) for fast training tests."""
    from lmcflow.data import Dataset

    g = torch.Generator().manual_seed(0)
    centers = torch.randn(4, 20, generator=g) * 2

    def make(n):
        y = torch.randint(0, 4, (n,), generator=g)
        return centers[y] + torch.randn(n, 20, generator=g), y

    (xtr, ytr), (xva, yva), (xte, yte) = make(512), make(128), make(256)
    return Dataset({"train": xtr, "val": xva, "test": xte}, {"train": ytr, "val": yva, "test": yte},
                   {"in_shape": [20], "num_classes": 4, "task": "classification"})


def pytest_terminal_summary(terminalreporter):
    try:
        from tests.test_faults import FAULTS
    except Exception:
        return
    if FAULTS:
        terminalreporter.section("fault injection")
        total = [0, 0]
        for name, (inj, surv) in sorted(FAULTS.items()):
            terminalreporter.write_line(f"{name}: injected {inj}, survived {surv}")
            total[0] += inj
            total[1] += surv
        terminalreporter.write_line(f"faults injected: {total[0]}, survived: {total[1]}")
