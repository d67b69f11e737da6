"""The cost model (lmcflow.plan.cost) and what jobs ask a cluster for (lmcflow.plan.requests): exact work
counts, estimates that follow the work, explicit overrides, grid groups split to fit cluster.max_runtime, a
point that cannot fit refused by name, and resources that never reach a job's params."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from lmcflow.cli import main
from lmcflow.config import ConfigError, expand_points, resolve_config
from lmcflow.config.partners import partner_point
from lmcflow.models import ModelSpec, build_model, count_parameters
from lmcflow.plan import Plan, cost, needed_jobs
from lmcflow.plan.summary import format_plan, planned_jobs, rule_rows

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("arch,in_shape,classes,width,norm", [
    ("mlp", (1, 28, 28), 10, 0.25, "none"), ("mlp", (1, 28, 28), 10, 2.0, "none"), ("sum_relu", (20,), 1, 1.0, "none"),
    ("vgg11", (3, 32, 32), 10, 0.25, "none"), ("vgg11", (3, 32, 32), 10, 0.5, "batchnorm"),
    ("resnet20", (3, 32, 32), 100, 0.5, "none"), ("resnet20", (3, 32, 32), 10, 1.0, "batchnorm")])
def test_forward_flops_and_params_equal_torch_counts(arch, in_shape, classes, width, norm):
    model = {"arch": arch, "width": width, "depth": 3, "base_width": 64 if arch != "mlp" else 512, "norm": norm}
    c = cost.model_counts(model, in_shape, classes)
    spec = ModelSpec(arch, in_shape, classes, width=width, depth=3, base_width=model["base_width"], norm=norm)
    net = build_model(spec).eval()
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        net(torch.zeros(2, *in_shape))
    assert c["flops"] == fc.get_total_flops() / 2
    assert c["params"] == count_parameters(net)


def test_cpu_rates_are_the_committed_benchmark():
    measured = json.loads((REPO / "benchmarks/results/cpu/cost_rates.json").read_text())
    for key, value in cost.CPU_RATES.items():
        assert value == pytest.approx(measured[key], rel=1e-3), key


def test_weight_matching_solver_ratio_is_the_committed_benchmark():
    measured = json.loads((REPO / "benchmarks/results/cpu/assignment_solvers.json").read_text())["widths"]
    widest = max(measured.values(), key=lambda w: w["units"])
    assert widest["units"] == 2048
    assert cost.WM_LAP_OVER_SCIPY == pytest.approx(widest["solvers"]["lapjv-warm"]["over_scipy"], abs=5e-4)


def config(**train):
    cfg = copy.deepcopy(resolve_config([str(REPO / "tests/configs/tiny.yaml")]))
    for study in cfg["studies"].values():
        study.setdefault("train", {}).update(train)
    cfg["defaults"]["train"]["resources"] = {"gpu": 0}
    cfg["defaults"]["merge"]["resources"] = {"gpu": 0}
    return cfg


def requests(plan, rule):
    return [j.request for j in planned_jobs(plan) if j.rule == rule]


def test_estimates_follow_the_work():
    short, long = Plan(config(epochs=2)), Plan(config(epochs=20))
    t_short, t_long = (sum(r.seconds for r in requests(p, "train")) for p in (short, long))
    startup = cost.CPU_RATES["startup_cpu_s"] * len(requests(short, "train"))
    assert (t_long - startup) == pytest.approx(10 * (t_short - startup), rel=0.2)  # the final evaluation is not ×10
    r = requests(long, "train")[0]
    assert r.estimated and r.device == "cpu" and r.gpu == 0
    assert r.runtime == cost.request_minutes(r.seconds, long.config["cluster"])
    assert r.mem_mb >= cost.MIN_MEM_MB


def test_an_untrained_null_partner_is_charged_its_lambda_paths():
    """Its pairs (real A, untrained B) run the same λ paths as the real pairs: the same estimate, not none."""
    cfg = resolve_config([str(REPO / "config/config.yaml")])
    real = next(p for p in expand_points(cfg).values() if p.study == "width" and p.train["epochs"] > 0)
    untrained = partner_point(real, "untrained")
    assert untrained.train["epochs"] == 0
    seconds = [cost.interpolate_seconds([p], 10, cfg["data"], cost.CPU_RATES) for p in (real, untrained)]
    assert seconds[0] > 0 and seconds[1] == pytest.approx(seconds[0])


def test_explicit_resources_override_the_estimate():
    cfg = config()
    cfg["defaults"]["train"]["resources"] = {"runtime": 7, "mem_mb": 1234, "gpu": 0}
    plan = Plan(cfg)
    for j in needed_jobs(plan):
        if j.rule == "train":
            r = plan.job_request("train", j.wc)
            assert not r.estimated and r.mem_mb == 1234
            # 7 min per model × the job's models × its points (width 1 or less: no width scaling)
            assert r.runtime == 7 * len(plan.grid.block_seeds(j.wc)) * len(plan.grid.group_points(j.wc))
    assert all(r.estimated for r in requests(plan, "interpolate"))  # merge.resources set no runtime


def limit_config(max_runtime, bundle_grid=16, epochs=300):
    cfg = config()
    cfg["studies"], cfg["claims"] = {"width": cfg["studies"]["width"]}, {}
    cfg["studies"]["width"]["train"].update(bundle_grid=bundle_grid, epochs=epochs)
    cfg["cluster"] = {**cfg["cluster"], "max_runtime": max_runtime, "job_overhead_s": 0, "safety": 1.0}
    return cfg


def test_grid_groups_split_to_fit_the_limit():
    free = Plan(limit_config(None))
    assert max(len(pts) for pts in free.grid.groups.values()) == 2  # width 1: both weight decays in one group
    grouped = max(r.runtime for r in requests(free, "train"))
    alone = max(r.runtime for r in requests(Plan(limit_config(None, bundle_grid=1)), "train"))
    assert alone < grouped
    plan = Plan(limit_config(alone))
    assert len(plan.grid.groups) == len(free.grid.groups) + 1  # the two-point group was split
    assert max(j.request.runtime for j in planned_jobs(plan)) <= alone
    assert (sorted(p.point for pts in plan.grid.groups.values() for p in pts)
            == sorted(p.point for p in free.grid.points.values()))
    assert all(r["over_limit"] == 0 for r in rule_rows(planned_jobs(plan), alone))


def test_a_point_that_cannot_fit_is_refused_by_name():
    cfg = limit_config(1, epochs=3000)
    with pytest.raises(ConfigError, match=r"cluster: point width/\S+: its train job .* cluster.max_runtime = 1"):
        Plan(cfg)
    Plan(cfg, enforce_limits=False)  # lmcflow plan shows such a run with the jobs above the limit


def test_resources_are_not_params():
    """A changed estimate (safety factor, limit that splits nothing) changes requests, never a job's params or
    outputs: nothing already computed reruns (tests/test_incremental.py checks it against snakemake)."""
    a, b = config(), config()
    b["cluster"] = {**b["cluster"], "safety": 3.0, "job_overhead_s": 600}
    pa, pb = Plan(a), Plan(b)
    ja, jb = needed_jobs(pa), needed_jobs(pb)
    assert [(j.rule, j.wildcards, j.output, j.input) for j in ja] == [(j.rule, j.wildcards, j.output, j.input)
                                                                       for j in jb]
    for j in ja:
        if j.rule == "train":
            assert pa.train.points(j.wc) == pb.train.points(j.wc)
            assert pa.job_request("train", j.wc).runtime < pb.job_request("train", j.wc).runtime


def test_plan_command_lists_the_jobs_above_a_limit(capsys):
    """`lmcflow plan` at a 1 h limit: the identifiability paper's long bundles cannot fit; it names the point on
    stderr, lists every job above the limit and exits 1; at the config's own 24 h limit it lists none."""
    cfg = str(REPO / "config/paper_identifiability.yaml")
    assert main(["plan", "--configfile", cfg, "--max-runtime", "60"]) == 1
    out, err = capsys.readouterr()
    assert "lmcflow plan: cluster: point " in err and "cluster.max_runtime = 60 min" in err
    over = [line for line in out.splitlines() if line.startswith("- train ")]
    assert over and all(int(line.rsplit(": ", 1)[1].split()[0]) > 60 for line in over)
    assert main(["plan", "--configfile", cfg]) == 0
    assert "jobs above the limit" not in capsys.readouterr().out


PLAN_BLOCK = re.compile(r"<!-- plan:(\S+) -->\n(.*?)<!-- /plan -->", re.S)


def plan_block(configfile: str) -> str:
    """What docs/cluster.md shows for ``configfile``: `lmcflow plan --configfile CONFIGFILE`'s output."""
    return format_plan(Plan.from_files([str(REPO / configfile)]), configfile) + "\n"


def test_cluster_doc_shows_the_current_plans_of_both_paper_configs():
    text = (REPO / "docs/cluster.md").read_text()
    blocks = dict(PLAN_BLOCK.findall(text))
    assert set(blocks) == {"config/paper_identifiability.yaml", "config/paper_width.yaml"}
    for configfile, shown in blocks.items():
        assert shown == plan_block(configfile), f"docs/cluster.md: regenerate the plan of {configfile}"
        assert "jobs above the limit" not in shown  # both fit their 24 h limit


if __name__ == "__main__":  # regenerate docs/cluster.md's plan blocks
    doc = REPO / "docs/cluster.md"
    doc.write_text(PLAN_BLOCK.sub(lambda m: f"<!-- plan:{m[1]} -->\n{plan_block(m[1])}<!-- /plan -->",
                                  doc.read_text()))
