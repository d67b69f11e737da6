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
ROWS = [{"arch": "mlp", "width": 1.0, "bf16_tflops": 0.2}, {"arch": "mlp", "width": 16.0, "bf16_tflops": 26.0}]
BUNDLE_ROWS = [{"arch": "mlp", "bundle": 1, "compile": "", "speedup_vs_single": 1.0},
               {"arch": "mlp", "bundle": 4, "compile": "", "speedup_vs_single": 3.5},
               {"arch": "mlp", "bundle": 8, "compile": "", "speedup_vs_single": 6.0},
               {"arch": "mlp", "bundle": 8, "compile": "default", "speedup_vs_single": 9.0},
               {"arch": "mlp", "bundle": 16, "compile": "", "error": "CUDA out of memory"}]


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))


def test_bundled_rates(bench):
    import estimate_gpu_hours as est

    assert est.bundle_speedup(BUNDLE_ROWS, "mlp", 5) == 3.5  # the largest measured bundle ≤ 5
    assert est.bundle_speedup(BUNDLE_ROWS, "mlp", 16) == 6.0  # failed measurements are skipped
    assert est.bundle_speedup(BUNDLE_ROWS, "mlp", 8, "default") == 9.0
    assert est.bundle_speedup(BUNDLE_ROWS, "mlp", 1) == 1.0
    assert est.bundle_speedup(BUNDLE_ROWS, "vgg11", 8) == 1.0  # not measured: no gain assumed
    assert est.point_rate(ROWS, BUNDLE_ROWS, "mlp", 1.0, 8, None, 40.0) == pytest.approx(1.2)
    assert est.point_rate(ROWS, BUNDLE_ROWS, "mlp", 8.0, 8, None, 40.0) == 26.0  # capped at the best measured rate
    assert est.point_rate(ROWS, BUNDLE_ROWS, "mlp", 1.0, 1, None, 40.0) == 0.2
    assert est.point_rate([], BUNDLE_ROWS, "mlp", 1.0, 8, None, 40.0) == 40.0


def test_estimate_reports_bundled_hours_and_job_counts(bench, tmp_path, capsys):
    import estimate_gpu_hours as est

    cfg = {"defaults": {"model": {"arch": "mlp", "width": 1.0, "depth": 2, "base_width": 64},
                        "train": {"epochs": 2000, "batch_size": 128, "bundle": 4},
                        "merge": {"lambdas": 11, "methods": ["identity"]}},
           "studies": {"s": {"dataset": "mnist", "seeds": [0, 1, 2, 3, 4], "sweep": {"model.width": [0.5, 1.0]}}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    (tmp_path / "t.json").write_text(json.dumps({"rows": ROWS}))
    (tmp_path / "b.json").write_text(json.dumps({"bundle_rows": BUNDLE_ROWS}))
    est.main([str(tmp_path / "c.yaml"), "--throughput", str(tmp_path / "t.json"), "--throughput",
              str(tmp_path / "b.json")])
    total = capsys.readouterr().out.strip().splitlines()[-1]
    m = re.search(r"~\s*([\d.]+) GPU-hours\s+~\s*([\d.]+) bundled\s+train jobs (\d+) -> (\d+)", total)
    assert m, total
    assert (m[3], m[4]) == ("10", "4")  # two points, 5 seeds each: bundles of 4 and 1
    assert float(m[2]) < float(m[1])
    est.main([str(tmp_path / "c.yaml"), "--throughput", str(tmp_path / "t.json"), "--bundle", "1"])
    assert "train jobs 10 -> 10" in capsys.readouterr().out


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
