"""The parts of the GPU checks (benchmarks/gpu_checks.sh) that run without a GPU: the GPU-hour estimate
with bundled rates, the bundle and λ-path timers on the CPU, the refusal without CUDA, the script's syntax.
The CUDA paths themselves are exercised only by gpu_checks.sh on a GPU machine."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import torch
import yaml

from lmcflow.models import ModelSpec

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
CPU = torch.device("cpu")


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))


def test_gpu_hours_are_the_plans(bench, capsys):
    """estimate_gpu_hours.py counts the plan's jobs (grid groups and bundles: 57 train jobs, null partners included,
    not one per bundle of every point) and sums the plan's estimates: one computation with `lmcflow plan`."""
    import estimate_gpu_hours as est

    from lmcflow.plan import load_plan
    from lmcflow.plan.summary import planned_jobs, rule_rows

    cfg = str(BENCH.parent / "config/paper_identifiability.yaml")
    est.main([cfg])
    total = capsys.readouterr().out.strip().splitlines()[-1]
    m = re.search(r"~\s*([\d.]+) GPU-hours estimated .* train jobs (\d+), jobs (\d+)", total)
    assert m, total
    rows = rule_rows(planned_jobs(load_plan(cfg)), None)
    assert int(m[2]) == next(r["jobs"] for r in rows if r["rule"] == "train") == 57
    assert int(m[3]) == sum(r["jobs"] for r in rows)
    assert float(m[1]) == pytest.approx(sum(r["gpu_h_estimated"] for r in rows), abs=0.06)


def test_bundle_and_lambda_timers_run_on_cpu(bench):
    import bench_gpu_bundle as b

    spec = ModelSpec("mlp", (1, 6, 6), 3, width=0.05, depth=1)
    data = b.synthetic(spec, 32, CPU)
    for k in (1, 3):
        assert 0 < b.time_bundle(spec, data, k, batch=8, steps=4, device=CPU, compile_mode="default") < 60
    lam = b.time_lambda_path(ModelSpec("resnet20", (3, 8, 8), 3, width=0.25, norm="batchnorm"), CPU, n=32, reps=1)
    assert lam["loop_s"] > 0 and lam["batched_s"] > 0 and lam["max_abs_loss_diff"] < 1e-4


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_gpu_benchmarks_refuse_without_cuda(bench):
    import bench_gpu_bundle
    import bench_gpu_training

    assert bench_gpu_bundle.main([]) == 2
    assert bench_gpu_training.main([]) == 2


def test_gpu_checks_script_parses():
    assert subprocess.run(["bash", "-n", str(BENCH / "gpu_checks.sh")], check=False).returncode == 0


def test_gpu_width_run_script_parses():
    assert subprocess.run(["bash", "-n", str(BENCH / "gpu_width_run.sh")], check=False).returncode == 0


def _run_script(out, config, **env):
    import os
    import sys

    venv = Path(sys.executable)
    full = {**os.environ, "PYTHON": str(venv), "SNAKEMAKE": str(venv.with_name("snakemake")), "CONFIG": str(config),
            "REQUIRE_CUDA": "0", "CORES": "2", **env}
    return subprocess.run(["bash", str(BENCH / "gpu_width_run.sh"), str(out)], env=full, capture_output=True,
                          text=True, timeout=1500, check=False)


def test_gpu_width_run_plans_the_gpu_config(tmp_path):
    """The real config/gpu_fmnist_width.yaml, planned (PLAN_ONLY): every width and both arms."""
    res = _run_script(tmp_path / "out", BENCH.parent / "config/gpu_fmnist_width.yaml", PLAN_ONLY="1")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    plan = (tmp_path / "out/plan.txt").read_text()
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", plan, re.MULTILINE))
    # 9 bundled points (x1/16 … x8, x1/16 weak: the two x1/16 arms one grid group) + 10 single x16 models
    # + 5 untrained x16 partners (the random-feature reference); x16: 10 pair jobs per arm and 10 with the
    # untrained partners; mechanism per point and per untrained pair; alignment: two methods per x16 null pair
    assert counts["train"] == "23" and counts["interpolate"] == "38" and counts["mechanism"] == "39"
    assert counts["align"] == "42" and counts["claim"] == "12" and counts["paper_table1"] == "1"
    summary = (tmp_path / "out/summary.txt").read_text()
    assert "step plan: rc=0" in summary and "PLAN_ONLY" in summary


@pytest.mark.slow
@pytest.mark.fmnist
def test_gpu_width_run_script_on_cpu_with_a_tiny_override(tmp_path):
    """The script end to end on the CPU with the GPU config shrunk (2 widths, one bundled and one trained a model per
    job, 2 seeds, 1 epoch on 2,000 Fashion-MNIST images, the default weight decay only, the merge methods of Table 1,
    the two claims read below): a run stopped by RUN_TIMEOUT still leaves its summary and a resumable work folder; the
    next call completes it and copies tables, claims, figures, the claims printout and lmcflow verify's report."""
    cfg = yaml.safe_load((BENCH.parent / "config/gpu_fmnist_width.yaml").read_text())
    cfg["device"] = "cpu"
    cfg["data"].update(val_size=1000, search_paths=["/usr/share/datasets/fashion-mnist"],
                       subsets={"fmnist_small": {"base": "fashion_mnist", "n_train": 2000}})
    cfg["defaults"]["model"] = {"base_width": 16}
    cfg["defaults"]["train"].update(epochs=1, batch_size=256)
    cfg["defaults"]["merge"] = {"lambdas": 3}
    cfg["claims"] = {c: cfg["claims"][c] for c in ("lewc", "active-neuron-overlap")}
    study = cfg["studies"]["width"]
    study.update(seeds=[0, 1], dataset="fmnist_small")
    study["merge"].update(train_eval_size=500, methods=["identity", "weight_matching"])  # what Table 1 reads
    study["merge"]["alignment"]["at"]["model.width"] = [0.5, 1.0]
    study["analysis"]["mechanism"]["samples"] = 200
    study["analysis"]["null_partners"]["at"]["model.width"] = [1.0]  # lewc's reference: untrained B at the widest
    # the GPU config's two kinds of point (a bundle of every seed; a model per job); its weak arm adds only jobs
    study["sweep"] = [{"model.width": [0.5], "train.weight_decay": [3.0e-3], "train.bundle": [8]},
                      {"model.width": [1.0], "train.weight_decay": [3.0e-3], "train.bundle": [1]}]
    config = tmp_path / "tiny_gpu_width.yaml"
    config.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    stopped = _run_script(out, config, RUN_TIMEOUT="15")
    assert stopped.returncode == 124, stopped.stdout[-2000:] + stopped.stderr[-2000:]
    assert "step run: rc=124" in (out / "summary.txt").read_text()
    done = _run_script(out, config, RUN_TIMEOUT="900")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for path in ("tables/paper_table1.parquet", "tables/layer_metrics.parquet", "claims/lewc.json",
                 "figures/paper_table1.png", "figures/width/logit_norm_along_lambda.png", "claims.txt",
                 "verify.txt", "plan.txt", "logs.tar.gz", "provenance.json"):
        assert (out / path).stat().st_size > 0, path
    assert "0 problems" in (out / "verify.txt").read_text()
    assert "active-neuron-overlap" in (out / "claims.txt").read_text()


# --------------------------------------------------------------------------- CPU run-time estimate from measured costs
def test_width_cost_estimate_by_hand(bench, tmp_path):
    """benchmarks/bench_width_costs.py --estimate on a hand-priced config: costs ∝ width² measured at ×1 and ×4,
    read at ×1 and (interpolated log-log) ×2; every term of the total checked by hand."""
    import bench_width_costs as bwc

    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"rows": [
        {"width": 1.0, "train_epoch_s": 10.0, "lambda_path_s": 5.0, "weight_matching_s": 1.0, "mechanism_s": 2.0},
        {"width": 4.0, "train_epoch_s": 160.0, "lambda_path_s": 80.0, "weight_matching_s": 16.0, "mechanism_s": 32.0},
    ]}))
    assert bwc._interp(json.loads(costs.read_text())["rows"], "train_epoch_s", 2.0) == pytest.approx(40.0)
    assert bwc._interp(json.loads(costs.read_text())["rows"], "train_epoch_s", 8.0) == pytest.approx(640.0)
    cfg = {"data": {"val_size": 5000}, "studies": {"w": {
        "dataset": "fashion_mnist", "seeds": [0, 1, 2],
        "model": {"depth": 2, "base_width": 512}, "train": {"epochs": 2, "bundle": 1},
        "merge": {"methods": ["identity", "weight_matching"], "train_eval_size": 5000, "lambdas": 11},
        "analysis": {"mechanism": {"methods": ["identity"], "samples": 2000, "lambdas": [0.25, 0.5, 0.75]}},
        "sweep": {"model.width": [1.0, 2.0]}}}, "claims": {}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    est = bwc.estimate(str(path), str(costs), cores=2, speed=1.0, startup=5.0)
    # per point 3 seeds, 3 pairs: train 2 epochs × 3 seeds; paths 3 pairs × 2 methods; weight matching and
    # mechanism 3 pairs; 3 train + 3 pair jobs × (interpolate, align, mechanism) = 12 jobs per point
    assert est["cpu_s"] == pytest.approx({"train": 2 * 3 * (10 + 40), "paths": 3 * 2 * (5 + 20),
                                          "alignment": 3 * (1 + 4), "mechanism": 3 * (2 + 8), "startup": 5 * 24})
    assert est["jobs_priced"] == 24 and est["cpu_total_s"] == pytest.approx(615.0)
    assert est["critical_path_s"] == pytest.approx(2 * 40 + 4 + 20 + 8)
    assert est["wall_s"] == pytest.approx(615.0 / 2)
    assert bwc.estimate(str(path), str(costs), cores=8, speed=2.0, startup=0.0)["wall_s"] == pytest.approx(112 / 2)
    cfg["studies"]["w"]["model"]["arch"] = "vgg11"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(SystemExit, match="only the measured MLP"):
        bwc.estimate(str(path), str(costs), cores=2, speed=1.0, startup=5.0)
