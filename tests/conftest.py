import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
FMNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

torch.set_num_threads(1)


# `make test` runs `pytest -n 2 --dist loadfile`: a test file runs on one worker (its module fixtures are made once),
# and so do the files that share one session run (SHARED_RUNS), so that the run is made once. The files go out
# heaviest first (HEAVY_FIRST, by their seconds in a full `make test` on the 2-core machine, measured with
# --durations; the rest in file order): the longest work starts first and the light files fill the gaps, so the two
# workers finish together. The SLURM file goes first although others cost more CPU: it mostly waits on the cluster,
# and a workflow run on the other worker (snakemake --cores 2) fills the core it leaves idle.
SHARED_RUNS = {"tests/test_workflow.py": "tiny_run", "tests/test_recovery.py": "small_run",
               "tests/test_reproducibility.py": "small_run", "tests/test_compare.py": "small_run",
               "tests/test_incremental.py": "incremental_run", "tests/test_incremental_seeds.py": "incremental_run"}
HEAVY_FIRST = ("tests/test_slurm.py", "small_run", "tests/test_gpu_scripts.py",
               "tests/test_workflow_identifiability.py", "tiny_run", "incremental_run", "tests/test_portable_bits.py",
               "tests/test_verify.py", "tests/test_faults.py", "tests/test_spec_sweep_heavy.py",
               "tests/test_replicates.py")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to under --dist loadfile: its file, or the session run its file shares."""
    path = nodeid.split("::", 1)[0]
    return SHARED_RUNS.get(path, path)


def pytest_collection_modifyitems(config, items):
    if not FMNIST_DIR.is_dir():
        skip = pytest.mark.skip(reason="Debian package dataset-fashion-mnist is not installed")
        for item in items:
            if "fmnist" in item.keywords:
                item.add_marker(skip)
    rank = {unit: i for i, unit in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))  # stable: file order within a rank


@pytest.hookimpl(optionalhook=True)  # a pytest run without xdist (a test's inner pytest) must still load this file
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile with ``work_unit`` as the unit, sent out in collection order (heaviest first)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling  # only under pytest-xdist, which calls this hook

    class SharedRunScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # xdist would sort the units by number of tests
    return SharedRunScheduling(config, log)


def run_snakemake(configfile, workdir, *args, timeout=900) -> str:
    """The workflow on ``configfile`` in ``workdir`` (2 cores); fails the test with the log's tail."""
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--snakefile", str(REPO / "Snakefile"),
           "--configfile", str(configfile), "--directory", str(workdir), "--cores", "2", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout + res.stderr


def copy_run(src: Path, dst: Path) -> Path:
    """A copy of a finished run's working directory with its file times (Snakemake and verify compare them): a test
    module that changes a shared run works on its own copy."""
    shutil.copytree(src, dst, symlinks=True)
    return dst


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """tests/configs/tiny.yaml, run once per session: the finished run that the end-to-end file of SHARED_RUNS
    copies."""
    wd = tmp_path_factory.mktemp("tiny_run")
    run_snakemake(REPO / "tests/configs/tiny.yaml", wd, timeout=1800)
    return wd


def small_config(path: Path) -> Path:
    """tiny.yaml cut down (32 jobs): a 2000-example Fashion-MNIST subset, two widths, three seeds, weight matching
    at the wider width, one claim; every kind of artifact the width study writes occurs."""
    cfg = yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text())
    cfg["data"]["subsets"] = {"fmnist_small": {"base": "fashion_mnist", "n_train": 2000}}
    width = cfg["studies"]["width"]
    width.update(dataset="fmnist_small", analysis={}, sweep={"model.width": [0.25, 1.0]},
                 merge={"methods": ["identity", "weight_matching"], "alignment": {"at": {"model.width": [1.0]}}})
    cfg["claims"] = {"width-merge-accuracy": {"study": "width"}}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.fixture(scope="session")
def small_config_file(tmp_path_factory):
    return small_config(tmp_path_factory.mktemp("small_config") / "small.yaml")


@pytest.fixture(scope="session")
def small_run(small_config_file, tmp_path_factory):
    """``small_config``, run once per session under umask 022: the finished run that the files of SHARED_RUNS
    share."""
    wd = tmp_path_factory.mktemp("small_run")
    old = os.umask(0o022)
    try:
        run_snakemake(small_config_file, wd, timeout=1800)  # a failure here fails three files
    finally:
        os.umask(old)
    return wd


# The config of ``incremental_run``: four seeds in one bundle of four, so that a fifth seed opens bundle 1
# (tests/test_incremental.py) and a run of seeds 0-2 plus seed 3 fills bundle 0 the way this run trained it whole
# (tests/test_incremental_seeds.py). Bundles are kept when seeds are added only on the CPU with one train thread;
# weight matching's align jobs run at width 0.5 only, the point test_incremental_seeds repeats.
INCREMENTAL = {
    "paths": {"results": "results", "work": "work", "logs": "logs"},
    "device": "cpu",
    "threads": {"train": 1, "merge": 1},
    "data": {"search_paths": [str(FMNIST_DIR)], "download": False, "val_size": 1000,
             "subsets": {"fmnist_small": {"base": "fashion_mnist", "n_train": 2000}}},  # a DAG, not arithmetic
    "defaults": {
        "model": {"base_width": 16},
        "train": {"epochs": 1, "batch_size": 512, "bundle": 4, "lr": 0.05},
        "merge": {"lambdas": 3, "train_eval_size": 1000},
    },
    "studies": {"width": {
        "dataset": "fmnist_small",
        "seeds": [0, 1, 2, 3],
        "merge": {"methods": ["identity", "weight_matching"], "alignment": {"at": {"model.width": [0.5]}}},
        "analysis": {"mechanism": {"methods": ["identity"], "samples": 200, "lambdas": [0.25, 0.5]}},
        "sweep": {"model.width": [0.5, 1.0]},  # the claim compares widths
    }},
    "claims": {"width-merge-accuracy": {"study": "width"}},
}


@pytest.fixture(scope="session")
def incremental_run(tmp_path_factory):
    """``INCREMENTAL``, run once per session (every target): the finished run that the files of SHARED_RUNS
    share. test_incremental dry-runs changed configs on it; test_incremental_seeds compares a run that adds seed 3
    with it, the straight run of all four seeds."""
    wd = tmp_path_factory.mktemp("incremental_run")
    path = wd / "base.yaml"
    path.write_text(yaml.safe_dump(INCREMENTAL))
    run_snakemake(path, wd)
    return wd


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
