"""The DAG as lmcflow.plan computes it, without Snakemake: targets, job inputs and job counts of each shipped
config, and the same counts as ``snakemake -n`` plans."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lmcflow.config import ConfigError
from lmcflow.plan import DuplicateOutput, Plan, job_counts, load_plan, needed_jobs, producers, rule_jobs

REPO = Path(__file__).resolve().parents[1]
SHIPPED = [*REPO.glob("config/*.yaml"), *REPO.glob("tests/configs/*.yaml")]
CONFIGS = [None] + sorted(str(p.relative_to(REPO)) for p in SHIPPED if p.name != "config.yaml")


def job(plan, rule, **wildcards):
    return next(j for j in needed_jobs(plan)
                if j.rule == rule and all(j.wildcards[k] == v for k, v in wildcards.items()))


@pytest.fixture(scope="module")
def default_plan():
    return load_plan(None)


def test_default_targets_and_counts(default_plan):
    targets = default_plan.targets.all_targets()
    assert targets[:3] == [f"results/tables/{k}.parquet" for k in ("runs", "interpolation", "barriers")]
    assert "results/claims/lewc.json" in targets and "results/tables/paper_table1.parquet" in targets
    assert targets[-2:] == ["results/provenance.json", "results/provenance.html"]
    assert len(targets) == len(set(targets)) == 87
    counts = job_counts(None)
    assert counts["total"] == 168 and counts["all"] == 1
    # the width study's null partners (3 kinds at 2 points): 6 train and interpolate jobs, 12 align and 6 mechanism
    # jobs more; the identifiability studies' (sigma_f, intrinsic_dim, coherence: 2 kinds each) 6 train and
    # interpolate jobs, 2 swap-cost and 2 identifiability jobs more
    assert (counts["train"], counts["interpolate"], counts["align"], counts["mechanism"]) == (21, 21, 18, 11)
    assert (counts["swap_costs"], counts["identifiability"]) == (3, 4)
    assert counts["merge_many"] == 3  # the width study's default-weight-decay arm, real models: one job per width
    assert counts["claim"] == len(default_plan.claims.names()) == 20


def test_default_job_inputs(default_plan):
    train = job(default_plan, "train", study="width", group="grid__width-0.0625", block="0")
    assert train.output == ["work/models/width/grid__width-0.0625/bundle-0"]
    assert train.input == {"data": ["work/data/fashion_mnist.safetensors"]}
    ident = job(default_plan, "identifiability", study="sigma_f", group="grid", blocks="0-0")
    assert ident.input == {"data": ["work/data/fashion_mnist_5k.safetensors"],
                           "bundles": ["work/models/sigma_f/grid/bundle-0"],
                           "interpolation": ["work/merge/sigma_f/grid/blocks-0-0.parquet"]}
    lewc = job(default_plan, "claim", claim="lewc")
    assert lewc.input == {"layer_metrics": ["work/tables/width/layer_metrics.parquet"],
                          "runs": ["work/tables/width/runs.parquet"],  # the endpoint gate's models
                          "provenance_runs": ["work/tables/width/runs.parquet"]}
    aligned = [j for j in needed_jobs(default_plan) if j.rule == "mechanism" and j.wildcards["method"] != "identity"]
    for j in aligned:  # a non-identity method's mechanism job reads rule align's files of its pair block
        w = j.wildcards
        paths = default_plan.paths
        assert j.input["alignment"] == [paths.align_file(w["study"], w["point"], w["method"], w["blocks"]),
                                        paths.align_row_file(w["study"], w["point"], w["method"], w["blocks"])]
    swap = job(default_plan, "swap_costs", study="intrinsic_dim")
    assert swap.input["bundle"] == ["work/models/intrinsic_dim/grid/bundle-0"]
    assert job(default_plan, "study_table_identifiability", study="sigma_f").input[""] == [  # + null partners'
        "work/identifiability/sigma_f/grid/identifiability-0-0.parquet",
        "work/identifiability/sigma_f/grid-2/identifiability-0-200.parquet",
        "work/identifiability/sigma_f/grid-3/identifiability-0-400.parquet"]


def test_null_partners_train_and_run_through_the_pair_jobs(default_plan):
    """The default's null partners: a partner point per kind at the two `at` points, trained by rule train from
    its own seeds (untrained: epochs 0), whose pair jobs read the real point's models A and the partners B."""
    P = default_plan
    partners = {(p.point, p.partner): p for p in P.grid.study_points("width") if p.partner != "real"}
    assert set(partners) == {(f"width-{w}__weight_decay-0.003__partner-{k}", k)
                             for w in ("0.0625", "0.5") for k in ("untrained", "shuffled_labels", "collapsed")}
    collapsed = partners[("width-0.5__weight_decay-0.003__partner-collapsed", "collapsed")]
    assert collapsed.seeds == [3000, 3001, 3002, 3003, 3004] and collapsed.train["epochs"] == 5
    assert collapsed.analysis["null_partners"]["collapse_scale"] == 0.1
    untrained = partners[("width-0.5__weight_decay-0.003__partner-untrained", "untrained")]
    shuffled = partners[("width-0.5__weight_decay-0.003__partner-shuffled_labels", "shuffled_labels")]
    assert untrained.seeds == [1000, 1001, 1002, 1003, 1004] and untrained.train["epochs"] == 0
    assert shuffled.seeds == [2000, 2001, 2002, 2003, 2004] and shuffled.train["epochs"] == 5
    assert {k: v for k, v in shuffled.train.items() if k != "epochs"} == \
        {k: v for k, v in P.grid.points[("width", "width-0.5__weight_decay-0.003")].train.items() if k != "epochs"}
    train = job(P, "train", study="width", group=shuffled.point, block="400")
    assert train.output == [f"work/models/width/{shuffled.point}/bundle-400"]
    assert [p["partner"] for p in P.train.points(train.wc)] == ["shuffled_labels"]  # the train job shuffles
    assert P.train.points(job(P, "train", study="width", group="grid__width-0.5", block="0").wc)[0].get(
        "partner") is None  # a real point's params are what they were without null partners
    merge = job(P, "interpolate", study="width", group=untrained.point, blocks="0-200")
    assert merge.input["bundles"] == ["work/models/width/grid__width-0.5/bundle-0",
                                      f"work/models/width/{untrained.point}/bundle-200"]
    assert P.grid.block_pairs(merge.wc) == [(a, 1000 + b) for a in range(5) for b in range(5) if a < b]
    (entry,) = P.merge.entries(merge.wc)
    assert entry["methods"] == ["identity", "weight_matching", "random_permutation"]
    real_bundle = "work/models/width/grid__width-0.5/bundle-0/width-0.5__weight_decay-0.003"
    assert entry["models"][0][0] == f"{real_bundle}/seed-0.safetensors"
    assert entry["models"][1004][0] == f"work/models/width/{untrained.point}/bundle-200/seed-1004.safetensors"
    align = job(P, "align", study="width", point=shuffled.point, method="weight_matching", blocks="0-400")
    assert align.input["bundles"] == ["work/models/width/grid__width-0.5/bundle-0",
                                      f"work/models/width/{shuffled.point}/bundle-400"]
    assert job(P, "mechanism", study="width", point=shuffled.point, method="identity", blocks="0-400")
    # the claims read the partner rows from the same study tables; their scale is the real points'
    lewc = job(P, "claim", claim="lewc")
    assert all(p.get("partner") is None for p in P.claims.points(lewc.wc))


def test_null_partners_config_errors():
    base = {"studies": {"width": {"analysis": {"null_partners": {"kinds": ["untrained"]}}, "seeds": [0, 1000]}}}
    with pytest.raises(ConfigError, match="below 1000"):
        Plan.from_files([], base, default_path=REPO / "config/config.yaml")
    with pytest.raises(ConfigError, match="null_partners"):
        Plan.from_files([], {"studies": {"width": {"analysis": {"null_partners": {"kinds": ["zeros"]}}}}},
                        default_path=REPO / "config/config.yaml")


@pytest.mark.parametrize("config", CONFIGS)
def test_every_file_has_one_maker_and_every_input_a_maker(config):
    plan = load_plan(config)
    made = producers(rule_jobs(plan))  # raises DuplicateOutput where two jobs would make one file
    jobs = needed_jobs(plan)  # raises where a job reads a file no job makes
    assert {f for j in jobs for f in j.output} >= set(plan.targets.all_targets())
    assert all(made[f] == j for j in jobs for f in j.output)
    assert sum(1 for j in jobs if j.rule == "all") == 1


def test_duplicate_outputs_are_refused(default_plan):
    jobs = rule_jobs(default_plan)
    with pytest.raises(DuplicateOutput, match="made by train"):
        producers(jobs + [next(j for j in jobs if j.rule == "train")])


def test_config_errors_surface_as_config_errors():
    with pytest.raises(ConfigError):
        Plan.from_files([], {"studies": {"width": {"dataset": "no_such_dataset"}}})


def dry_run(config, workdir) -> tuple[dict, set]:
    """({rule: jobs} of the job-stats table, {(rule, outputs, inputs)} of the jobs) of ``snakemake -n``."""
    cmd = [str(Path(sys.executable).with_name("snakemake")), "-n", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(workdir)] + (["--configfile", str(REPO / config)] if config else [])
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    text = res.stdout + res.stderr
    table = text.split("Job stats:")[1].split("\n\n")[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    jobs = set()
    for block in re.split(r"^(?=(?:local)?rule \w+:$)", text, flags=re.M)[1:]:
        rule = re.match(r"(?:local)?rule (\w+):", block)[1]
        field = {m[1]: tuple(m[2].split(", ")) for m in re.finditer(r"^    (input|output): (.*)$", block, re.M)}
        jobs.add((rule, field.get("output", ()), field.get("input", ())))
    return counts, jobs


@pytest.mark.parametrize("config", CONFIGS)
def test_jobs_and_counts_equal_snakemakes_dry_run(config, tmp_path):
    counts, jobs = dry_run(config, tmp_path)
    assert job_counts(config) == counts
    planned = {(j.rule, tuple(j.output), tuple(j.input_files())) for j in needed_jobs(load_plan(config))}
    assert planned == jobs
