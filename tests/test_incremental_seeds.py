"""Adding a seed keeps the finished bundles where a model's bits do not depend on its bundle-mates
(``lmcflow.plan.kept``): only the new seed trains and only its new pairs are merged, and the checkpoints and
tables equal a straight run with every seed (the session's ``incremental_run``, at the point both have), byte for
byte."""
import copy
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lmcflow.plan import Plan
from lmcflow.plan.kept import keeps_bundles
from lmcflow.tables import RUN_SPECIFIC_COLUMNS
from tests.conftest import INCREMENTAL, run_snakemake
from tests.test_incremental import planned_jobs

pytestmark = [pytest.mark.slow, pytest.mark.fmnist]

POINT = "width-0.5"  # the point of the runs here: of the session's run, the incremental runs repeat this one


def with_seeds(seeds):
    """The session's config at width 0.5 alone (no claim: the width claim needs two widths) with ``seeds``: the
    point's jobs are those of the session's run, which trains every seed of it in one bundle (the straight run)."""
    cfg = copy.deepcopy(INCREMENTAL)
    cfg["studies"]["width"].update(seeds=seeds, sweep={"model.width": [0.5]})
    cfg["claims"] = {}
    return cfg


# what the test reads: the tables of the trained models and of their pairs' barriers (weight matching's barriers
# need its align jobs; no figures)
TARGETS = [f"results/tables/{kind}.parquet" for kind in ("runs", "barriers")]


def run(workdir: Path, cfg: dict, *args) -> str:
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return run_snakemake(path, workdir, "--cores", "1", *TARGETS, *args)


def checkpoints(workdir: Path) -> dict[int, bytes]:
    """{seed: checkpoint bytes} of every model of POINT, wherever its bundle lies."""
    models = workdir / "work/models/width" / POINT
    return {int(f.stem.split("-")[1]): f.read_bytes() for f in models.rglob("*.safetensors")}


def table(workdir: Path, kind: str, drop=()) -> pd.DataFrame:
    """The rows of POINT in a result table, without the columns that differ between runs (and ``drop``)."""
    df = pd.read_parquet(workdir / f"results/tables/{kind}.parquet")
    df = df[df.point == POINT]
    assert len(df), (workdir, kind)
    df = df.drop(columns=[c for c in (*RUN_SPECIFIC_COLUMNS.get(kind, ()), *drop) if c in df.columns])
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def test_adding_a_seed_to_a_bundle_keeps_its_models(tmp_path, incremental_run):
    straight = incremental_run  # seeds 0-3 trained as one bundle of four (bundle size 4)
    incremental = tmp_path / "incremental"
    # the same prepared data (the same data section; file times kept): both runs train from the same bytes
    shutil.copytree(straight / "work/data", incremental / "work/data", ignore=shutil.ignore_patterns("raw"))
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
