"""Replicate seeds (``replicate_seeds``): every claim study trained again on disjoint seeds, every claim decided
on both, and the claim JSON, claims.parquet, ``lmcflow claims`` and ``--markdown`` saying whether it replicated."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lmcflow.cli import claims_markdown
from lmcflow.config import ConfigError, Point, replicate_of, resolve_config
from lmcflow.jobs.report import run_claim
from lmcflow.plan import Plan, job_counts
from tests.conftest import REPO, run_snakemake

CONFIG = REPO / "tests/configs/replicate.yaml"


def test_a_replicate_is_the_claim_study_with_other_seeds_only():
    cfg = resolve_config([str(CONFIG)])
    assert replicate_of(cfg) == {"width-replicate": "width"}
    rep, orig = cfg["studies"]["width-replicate"], cfg["studies"]["width"]
    assert rep["seeds"] == [4, 5, 6, 7] and {**rep, "seeds": orig["seeds"]} == orig
    default = resolve_config([])
    assert "width-replicate" not in default["studies"] and not replicate_of(default)


def test_replicate_seeds_must_be_disjoint_from_the_study_seeds():
    with pytest.raises(ConfigError, match=r"replicate_seeds: \[3\] are also seeds of study 'width'"):
        resolve_config([str(CONFIG)], {"replicate_seeds": [3, 8, 9, 10]})


def test_a_command_line_list_is_typed_as_yaml_types_it():
    """Snakemake's --config parses a list with YAML's base loader: every item a string."""
    cfg = resolve_config([str(CONFIG)], {"replicate_seeds": ["8", "9", "10", "11"]})
    assert cfg["studies"]["width-replicate"]["seeds"] == [8, 9, 10, 11]


def test_the_plan_decides_claims_on_the_replicate_and_draws_no_figures_of_it():
    plan = Plan.from_files([str(CONFIG)])
    inputs = plan.claims.inputs(type("W", (), {"claim": "width-merge-accuracy"})())
    assert inputs["replicate__barriers"] == ["work/tables/width-replicate/barriers.parquet"]
    assert inputs["barriers"] == ["work/tables/width/barriers.parquet"]
    assert not [t for t in plan.targets.all_targets() if "figures/width-replicate" in t]
    assert list(plan.targets.table1_studies()) == ["width"]
    assert job_counts(CONFIG)["train"] == 4  # one bundle of four seeds per width, of the study and of its replicate
    plan_off = Plan.from_files([str(CONFIG)], {"replicate_seeds": []})
    assert "replicate__barriers" not in plan_off.claims.inputs(type("W", (), {"claim": "width-merge-accuracy"})())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run up to what the tests read: the claims (each decided on the study and on its replicate), their table
    and the runs table; not the figures, the report's front page, the paper's table or the provenance."""
    work = tmp_path_factory.mktemp("replicate")
    run_snakemake(CONFIG, work, "results/tables/claims.parquet", "results/tables/runs.parquet")
    return work


@pytest.mark.fmnist
def test_every_claim_is_decided_again_on_the_replicate_seeds(run):
    runs = pd.read_parquet(run / "results/tables/runs.parquet")
    assert sorted(runs[runs.study == "width-replicate"].seed.unique()) == [4, 5, 6, 7]
    assert sorted(runs[runs.study == "width"].seed.unique()) == [0, 1, 2, 3]
    for cid in ("width-merge-accuracy", "temperature-calibration"):
        result = json.loads((run / f"results/claims/{cid}.json").read_text())
        rep = result["replication"]
        assert rep["seeds"] == [4, 5, 6, 7] and rep["studies"] == ["width-replicate"]
        assert rep["replicated"] == (rep["verdict"] == result["verdict"])
        # the replicate's verdict is the claim decided on the replicate study alone, from the same tables: every
        # table of the replicate study the claim read (the merge's paths, barriers and, for the gates, runs)
        ccfg = {"study": "width-replicate"}
        read = [Path(p) for p in result["tables_read"] if Path(p).parent.name == "width-replicate"]
        assert {p.stem for p in read} == {"interpolation", "barriers", "runs"}, read
        tables = {p.stem: [str(run / p)] for p in read}
        plan, wc = Plan.from_files([str(CONFIG)]), type("W", (), {"claim": cid})()
        points = [Point.from_dict(p) for p in plan.claims.points(wc)]
        alone = run_claim(cid, ccfg, tables, points, str(run / f"alone-{cid}.json"),
                          [str(run / "work/tables/width-replicate/runs.parquet")],
                          datasets=plan.claims.datasets(wc))  # the endpoint gate's chance level, as the rule passes
        assert (alone["verdict"], alone["statistic"], alone["ci_low"], alone["reason"]) == (
            rep["verdict"], rep["statistic"], rep["ci_low"], rep["reason"])
        assert rep["statistic"] is not None and rep["n_seeds"] == 4  # a gated claim still computes its statistic
    df = pd.read_parquet(run / "results/tables/claims.parquet").set_index("claim_id")
    assert set(df.replicated) <= {"yes", "no"} and (df.replicate_seeds == "4,5,6,7").all()


@pytest.mark.fmnist
def test_claims_and_markdown_say_whether_each_verdict_replicated(run):
    out = subprocess.run([sys.executable, "-m", "lmcflow.cli", "claims", str(run / "results")], capture_output=True,
                         text=True, check=True).stdout
    df = pd.read_parquet(run / "results/tables/claims.parquet")
    for r in df.itertuples():
        line = next(x for x in out.splitlines() if "replicate (seeds 4,5,6,7)" in x and r.replicate_verdict in x
                    and (("NOT REPLICATED" in x) == (r.replicated == "no")))
        assert line
    md = claims_markdown(run / "results")
    assert md.splitlines()[0].endswith("| replicate seeds: verdict |")
    for r in df.itertuples():
        row = next(x for x in md.splitlines() if f"`{r.claim_id}`" in x)
        assert row.endswith(f" 4–7: {r.replicate_verdict}" + ("" if r.replicated == "yes" else " (**not replicated**)")
                            + " |")
