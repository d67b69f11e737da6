"""Adding a seed keeps the finished bundles where a model's bits do not depend on its bundle-mates
(``lmcflow.plan.kept``): only the new seed trains and only its new pairs are merged, and the checkpoints and
tables equal a straight run with every seed, byte for byte."""
import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lmcflow.plan import Plan
from lmcflow.plan.kept import keeps_bundles
from lmcflow.tables import RUN_SPECIFIC_COLUMNS
from tests.conftest import run_snakemake
from tests.test_incremental import planned_jobs

pytestmark = [pytest.mark.slow, pytest.mark.fmnist]

CFG = {
    "paths": {"results": "results", "work": "work", "logs": "logs"},
    "device": "cpu",
    "threads": {"train": 1, "merge": 1},
    "data": {"search_paths": ["/usr/share/datasets/fashion-mnist"], "download": False, "val_size": 1000},
    "defaults": {
        "model": {"base_width": 16},
        "train": {"epochs": 1, "batch_size": 512, "bundle": 5, "lr": 0.05},
        "merge": {"lambdas": 3, "train_eval_size": 1000},
    },
    "studies": {"width": {"dataset": "fashion_mnist", "seeds": [0, 1, 2],
                          "merge": {"methods": ["identity", "weight_matching"]},
                          "sweep": {"model.width": [0.5]}}},
}


def with_seeds(seeds):
    cfg = copy.deepcopy(CFG)
    cfg["studies"]["width"]["seeds"] = seeds
    return cfg


# what the test reads: the tables of the trained models, their pairs' barriers and the permutations (no figures)
TARGETS = [f"results/tables/{kind}.parquet" for kind in ("runs", "barriers", "alignment")]


def run(workdir: Path, cfg: dict, *args) -> str:
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return run_snakemake(path, workdir, "--cores", "1", *TARGETS, *args)


def checkpoints(workdir: Path) -> dict[int, bytes]:
    """{seed: checkpoint bytes} of every model of the study, wherever its bundle lies."""
    return {int(f.stem.split("-")[1]): f.read_bytes() for f in (workdir / "work/models/width").rglob("*.safetensors")}


def table(workdir: Path, kind: str, drop=()) -> pd.DataFrame:
    df = pd.read_parquet(workdir / f"results/tables/{kind}.parquet")
    df = df.drop(columns=[c for c in (*RUN_SPECIFIC_COLUMNS.get(kind, ()), *drop) if c in df.columns])
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def test_adding_a_seed_to_a_bundle_keeps_its_models(tmp_path):
    incremental, straight = tmp_path / "incremental", tmp_path / "straight"
    incremental.mkdir()
    straight.mkdir()
    run(incremental, with_seeds([0, 1, 2]))
    before = checkpoints(incremental)
    planned = planned_jobs(run(incremental, with_seeds([0, 1, 2, 3]), "-n"))
    trained = [wc for rule, wc in planned if rule == "train"]
    assert [wc["block"] for wc in trained] == ["0s3"], trained  # bundle-0 (seeds 0-2) is kept
    merged = {(rule, wc["blocks"]) for rule, wc in planned if rule in ("interpolate", "align")}
    assert merged == {("interpolate", "0-0s3"), ("align", "0-0s3")}, merged  # only the pairs of seed 3
    run(incremental, with_seeds([0, 1, 2, 3]))
    after = checkpoints(incremental)
    assert {s: after[s] for s in before} == before  # the kept models were not rewritten
    run(straight, with_seeds([0, 1, 2, 3]))
    assert sorted(after) == [0, 1, 2, 3]
    assert after == checkpoints(straight)  # byte for byte, seed 3 trained alone as in the bundle of four
    # the runs rows differ only in which bundle trained each model and where its checkpoint lies
    moved = ["bundle_id", "checkpoint"]
    pd.testing.assert_frame_equal(table(incremental, "runs", moved), table(straight, "runs", moved))
    assert sorted(Path(c).name for c in table(incremental, "runs")["checkpoint"]) == \
        sorted(Path(c).name for c in table(straight, "runs")["checkpoint"])
    pd.testing.assert_frame_equal(table(incremental, "barriers"), table(straight, "barriers"))


def test_bundles_are_kept_only_where_bits_do_not_depend_on_bundle_mates(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(with_seeds([0, 1, 2])))
    plan = Plan.from_files([path])
    pts = list(plan.grid.groups.values())[0]
    assert keeps_bundles(plan.config, pts)
    for key, value in (("device", "auto"), ("device", "cuda"), ("threads", {"train": 2, "merge": 1})):
        assert not keeps_bundles(dict(plan.config, **{key: value}), pts), (key, value)
    conv = [copy.deepcopy(p) for p in pts]
    for p in conv:
        p.model["arch"] = "vgg11"
    assert not keeps_bundles(plan.config, conv)
