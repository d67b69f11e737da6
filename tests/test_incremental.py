"""The DAG reruns only what a change affects: dry runs after one real tiny run.

Each rule's ``params`` carry only what determines its output (``Point.job_dict``), and bundles are
blocks of seed values (``lmcflow.grouping``), so adding seeds never reshuffles the existing bundles.
"""
import copy
import re

import pytest
import yaml

from tests.conftest import INCREMENTAL, run_snakemake

pytestmark = [pytest.mark.slow, pytest.mark.fmnist]

BASE = INCREMENTAL  # four seeds, bundles of four, two widths


def planned_jobs(output: str) -> list[tuple[str, dict]]:
    """(rule, wildcards) of every job a dry run lists."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not m:
            continue
        wc = re.search(r"^\s*wildcards: (.*)$", block, re.MULTILINE)
        pairs = dict(kv.split("=", 1) for kv in wc.group(1).split(", ")) if wc else {}
        jobs.append((m.group(1), pairs))
    return jobs


def dry_run(workdir, cfg) -> list[tuple[str, dict]]:
    path = workdir / "variant.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return planned_jobs(run_snakemake(path, workdir, "-n"))


def rules(jobs) -> set:
    return {r for r, _ in jobs}


@pytest.fixture(scope="module")
def finished_run(incremental_run):
    """The session's run of BASE: the dry runs here write only their config file into it."""
    assert dry_run(incremental_run, BASE) == []  # nothing left to do
    return incremental_run


def test_adding_a_seed_trains_only_its_bundle_and_merges_only_new_pairs(finished_run):
    cfg = copy.deepcopy(BASE)
    cfg["studies"]["width"]["seeds"] = [0, 1, 2, 3, 4]  # seed 4 opens bundle 1 (bundle size 4)
    jobs = dry_run(finished_run, cfg)
    trained = [wc for r, wc in jobs if r == "train"]
    assert trained and all(wc["block"] == "1" for wc in trained)  # bundle 0 (seeds 0-3) is not retrained
    for rule in ("interpolate", "align", "mechanism"):
        blocks = {wc["blocks"] for r, wc in jobs if r == rule}
        assert blocks == {"0-1"}, (rule, blocks)  # pairs (0,4), (1,4), (2,4), (3,4) only
    assert "prepare_data" not in rules(jobs)


def test_merge_settings_retrain_nothing(finished_run):
    cfg = copy.deepcopy(BASE)
    cfg["defaults"]["merge"]["lambdas"] = 5
    jobs = rules(dry_run(finished_run, cfg))
    assert "interpolate" in jobs and "train" not in jobs and "prepare_data" not in jobs
    assert "align" not in jobs and "mechanism" not in jobs  # the λ grid of the path is not theirs


def test_analysis_settings_retrain_and_remerge_nothing(finished_run):
    cfg = copy.deepcopy(BASE)
    cfg["studies"]["width"]["analysis"]["mechanism"]["samples"] = 300
    jobs = rules(dry_run(finished_run, cfg))
    assert "mechanism" in jobs
    assert not jobs & {"train", "interpolate", "align", "prepare_data"}


def test_claim_threshold_reruns_only_claim_jobs(finished_run):
    cfg = copy.deepcopy(BASE)
    cfg["claims"]["width-merge-accuracy"]["max_gap_widest"] = 0.5
    jobs = rules(dry_run(finished_run, cfg))
    assert jobs and jobs <= {"claim", "claims_table", "report_front_page", "all"}, jobs


def test_resources_and_threads_rerun_nothing(finished_run):
    cfg = copy.deepcopy(BASE)
    cfg["defaults"]["train"]["resources"] = {"mem_mb": 123, "runtime": 7}
    cfg["threads"] = {"train": 2, "merge": 2}
    assert dry_run(finished_run, cfg) == []


def test_a_changed_estimate_reruns_nothing(finished_run):
    """Resources are not params: another safety factor, job overhead and a limit that splits no group change
    every job's request, never what the jobs computed."""
    cfg = copy.deepcopy(BASE)
    cfg["cluster"] = {"safety": 4.0, "job_overhead_s": 900, "max_runtime": 10000, "max_mem_mb": 100000}
    assert dry_run(finished_run, cfg) == []
