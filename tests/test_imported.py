"""A user's own trained checkpoints and data through the pipeline without training (examples/imported): the
example end to end as docs/usage.md gives its commands, each checkpoint hashed into provenance and rerun when it
changes; bad inputs refused with lmcflow's own errors naming the key or file; ``lmcflow spec`` on a factory."""
import copy
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import save_file

from lmcflow.config import ConfigError, resolve_config
from lmcflow.data import load_dataset
from lmcflow.imported import fit_checkpoint, prepare_custom, read_state_dict, verified
from lmcflow.io import CorruptFileError, folder_sha256, load_tensors, sha256_file
from lmcflow.plan import Plan
from lmcflow.plan.cost import dataset_shape
from lmcflow.plan.imported import checkpoint_files
from lmcflow.tables import read_results
from tests.conftest import REPO, run_snakemake
from tests.test_incremental import planned_jobs

EXAMPLE = REPO / "examples/imported"
CONFIG = yaml.safe_load((EXAMPLE / "config.yaml").read_text())


def write_checkpoints(workdir: Path) -> None:
    subprocess.run([sys.executable, str(EXAMPLE / "train_checkpoints.py"), "checkpoints"], cwd=workdir, check=True,
                   capture_output=True, timeout=300)


@pytest.mark.slow
def test_the_example_imports_aligns_merges_and_repairs_without_training(tmp_path):
    t0 = time.perf_counter()
    write_checkpoints(tmp_path)
    run_snakemake(EXAMPLE / "config.yaml", tmp_path)
    print(f"\nexamples/imported end to end: {time.perf_counter() - t0:.1f} s")
    results = tmp_path / "results/imported"
    runs = pd.read_parquet(results / "tables/runs.parquet")
    assert sorted(runs["seed"]) == [0, 1, 2] and (runs["train_seconds"] == 0).all()
    assert (runs["test_acc"] > 0.5).all()  # four classes: the imported weights, not a fresh init
    files = dict(zip([0, 1, 2], CONFIG["studies"]["mine"]["import"]["checkpoints"], strict=True))
    prov = json.loads((results / "provenance.json").read_text())["imported_checkpoints"]["mine"]
    for _, row in runs.iterrows():
        src = tmp_path / files[row["seed"]]
        _, meta = load_tensors(tmp_path / row["checkpoint"], expected_sha256=row["checkpoint_sha256"])
        assert meta["source"] == {"file": files[row["seed"]], "sha256": sha256_file(src)}
        assert prov[str(row["seed"])]["sha256"] == sha256_file(src)
    barriers = read_results(results, "barriers", repair=True)  # the plain merges and the REPAIR'd ones
    assert set(barriers["method"]) == {"identity", "weight_matching", "activation_matching"}
    assert set(barriers["repair"]) == {False, True}
    assert len(pd.read_parquet(results / "tables/alignment.parquet")) > 0
    # a changed checkpoint reruns its import and what reads it; the others' files are not touched
    state = read_state_dict(tmp_path / files[1])
    state["7.bias"] = state["7.bias"] + 1.0
    save_file(state, tmp_path / files[1])
    planned = {rule for rule, _ in planned_jobs(run_snakemake(EXAMPLE / "config.yaml", tmp_path, "-n"))}
    assert {"import_models", "interpolate", "align"} <= planned and "prepare_data" not in planned


def test_checkpoints_are_checked_before_use(tmp_path):
    model = torch.nn.Linear(3, 2)
    save_file(model.state_dict(), tmp_path / "a.safetensors")
    torch.save({"state_dict": model.state_dict(), "epoch": 3}, tmp_path / "b.pt")
    assert all(torch.equal(read_state_dict(tmp_path / "b.pt")[k], v) for k, v in model.state_dict().items())
    torch.save({"model": model}, tmp_path / "pickled.pt")  # a whole module: pickle, refused
    with pytest.raises(ValueError, match="pickled.pt: cannot be read with torch.load.weights_only=True"):
        read_state_dict(tmp_path / "pickled.pt")
    with pytest.raises(ValueError, match=r"a.safetensors: does not fit .*missing \['0.bias', '0.weight'\]"):
        fit_checkpoint(torch.nn.Sequential(torch.nn.Linear(3, 2)), read_state_dict(tmp_path / "a.safetensors"),
                  tmp_path / "a.safetensors")
    sha = sha256_file(tmp_path / "a.safetensors")
    save_file({k: v + 1 for k, v in model.state_dict().items()}, tmp_path / "a.safetensors")
    with pytest.raises(CorruptFileError, match="changed since the DAG was built"):
        verified(tmp_path / "a.safetensors", sha, "the checkpoint of seed 0")


def plan_of(cfg: dict, workdir: Path, monkeypatch) -> Plan:
    monkeypatch.chdir(workdir)
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return Plan(resolve_config([str(path)]))


@pytest.mark.parametrize("change, message", [
    (lambda s: s["import"].update(checkpoints=["checkpoints/model-0.safetensors", "nope.pt", "x.pt"]),
     r"studies.mine.import.checkpoints\[1\]: nope.pt \(seed 1\) does not exist"),
    (lambda s: s["import"].update(checkpoints=["checkpoints/model-0.safetensors"]),
     r"studies.mine.import.checkpoints: 1 files for 3 seeds"),
    (lambda s: s.update(train={"epochs": 3}), r"studies.mine.train: a study of imported checkpoints trains nothing"),
    (lambda s: s.update(model={"arch": "mlp"}), r"studies.mine.model.arch: imported checkpoints need"),
])
def test_bad_imports_are_refused_naming_the_key(tmp_path, monkeypatch, change, message):
    (tmp_path / "checkpoints").mkdir()
    for f in ("model-0.safetensors", "model-1.safetensors", "model-2.pt"):
        (tmp_path / "checkpoints" / f).write_bytes(b"x")
    cfg = copy.deepcopy(CONFIG)
    plan_of(cfg, tmp_path, monkeypatch)  # the example as it is: valid
    change(cfg["studies"]["mine"])
    with pytest.raises(ConfigError, match=message):
        plan_of(cfg, tmp_path, monkeypatch)


def test_lmcflow_spec_prints_groups_coverage_and_the_proof():
    res = subprocess.run([sys.executable, "-m", "lmcflow.cli", "spec", "examples.imported.net:build", "--in-shape",
                          "1,8,8", "--num-classes", "4"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "groups (2):" in out and "coverage by layer (10/11 hidden axes permuted" in out
    assert "proof: a random permutation of every group changes the outputs by" in out and "refused: nothing" in out
    bad = subprocess.run([sys.executable, "-m", "lmcflow.cli", "spec", "examples.imported.net:nope", "--in-shape",
                          "1,8,8"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "has no function 'nope'" in bad.stderr


def test_an_image_folder_is_prepared_and_hashed(tmp_path):
    from PIL import Image

    for split, n in (("train", 6), ("test", 4)):
        for k, label in enumerate(("cat", "dog")):
            (tmp_path / "imgs" / split / label).mkdir(parents=True)
            for i in range(n):
                pixels = np.full((10, 12, 3), 20 * i + 100 * k, np.uint8)
                Image.fromarray(pixels).save(tmp_path / "imgs" / split / label / f"{i}.png")
    cfg = {"image_folder": str(tmp_path / "imgs"), "image_size": [8, 8]}
    data_cfg = {"val_size": 2, "split_seed": 0, "custom": {"photos": cfg}}
    digest = folder_sha256(tmp_path / "imgs")
    meta = prepare_custom("photos", {**cfg, "sha256": digest}, data_cfg,
                          tmp_path / "photos.safetensors")
    assert (meta["in_shape"], meta["num_classes"], meta["sizes"]) == ([3, 8, 8], 2, {"train": 10, "val": 2, "test": 8})
    assert abs(load_dataset(tmp_path / "photos.safetensors").x["train"].mean().item()) < 1e-5  # normalised
    shape = dataset_shape("photos", data_cfg)  # the cost model, before preparation
    assert (shape["in_shape"], shape["n_train"], shape["n_test"]) == ((3, 8, 8), 10, 8)
    Image.fromarray(np.full((10, 12, 3), 255, np.uint8)).save(tmp_path / "imgs/train/cat/0.png")
    with pytest.raises(CorruptFileError, match="image_folder changed since the DAG was built"):
        prepare_custom("photos", {**cfg, "sha256": digest}, data_cfg, tmp_path / "again.safetensors")
    # checkpoints named by a {seed} pattern
    for s in (0, 1):
        (tmp_path / f"m-{s}.pt").write_bytes(b"x")
    assert checkpoint_files("s", {"checkpoints": str(tmp_path / "m-{seed}.pt")}, [1, 0]) == {
        1: str(tmp_path / "m-1.pt"), 0: str(tmp_path / "m-0.pt")}


def test_lmcflow_validate_names_a_missing_checkpoint(tmp_path, monkeypatch, capsys):
    from lmcflow.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["validate", str(EXAMPLE / "config.yaml")]) == 2
    assert "studies.mine.import.checkpoints[0]: checkpoints/model-0.safetensors (seed 0) does not exist" in \
        capsys.readouterr().err


def test_the_plan_counts_the_import_jobs_as_snakemake_plans_them(tmp_path, monkeypatch):
    """15 jobs: what docs/usage.md states and the example's run shows; the checkpoints are sources, not outputs."""
    from lmcflow.plan import plan_job_counts

    (tmp_path / "checkpoints").mkdir()
    for f in ("model-0.safetensors", "model-1.safetensors", "model-2.pt"):
        (tmp_path / "checkpoints" / f).write_bytes(b"x")
    counts = plan_job_counts(plan_of(copy.deepcopy(CONFIG), tmp_path, monkeypatch))
    assert (counts["import_models"], counts.get("train", 0), counts["total"]) == (1, 0, 15)
