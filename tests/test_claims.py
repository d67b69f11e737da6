"""Claim verdicts on hand-made barrier tables: each verdict can be reached."""
import itertools

import numpy as np
import pandas as pd
import pytest

from lmcflow.claims import REGISTRY, bootstrap_ci, combine, verdict_below

PAIRS = list(itertools.combinations(range(4), 2))


def barrier_table(error_by_width, raw_loss_by_width, cal_loss_by_width, noise=0.002):
    rng = np.random.default_rng(0)
    rows = []
    for (a, b), (w, err) in itertools.product(PAIRS, error_by_width.items()):
        for metric, calibrated, val in (("error", False, err), ("error", True, err),
                                        ("loss", False, raw_loss_by_width[w]), ("loss", True, cal_loss_by_width[w])):
            rows.append(dict(seed_a=a, seed_b=b, width=w, method="identity", split="test", metric=metric,
                             calibrated=calibrated, definition="entezari", value=val + rng.normal(0, noise)))
    return {"barriers": pd.DataFrame(rows)}


def run(cid, tables, **params):
    claim = REGISTRY[cid]
    return claim.evaluate(tables, claim.params(params))


def test_width_claim_supported_refuted_inconclusive():
    good = barrier_table({0.25: 0.2, 1: 0.05, 4: 0.005}, {0.25: 1, 1: 1, 4: 1}, {0.25: .5, 1: .2, 4: .01})
    assert run("width-merge-accuracy", good)["verdict"] == "supported"
    flat = barrier_table({0.25: 0.2, 1: 0.2, 4: 0.2}, {0.25: 1, 1: 1, 4: 1}, {0.25: 1, 1: 1, 4: 1})
    assert run("width-merge-accuracy", flat)["verdict"] == "not_supported"
    border = barrier_table({0.25: 0.2, 1: 0.1, 4: 0.02}, {0.25: 1, 1: 1, 4: 1}, {0.25: 1, 1: 1, 4: 1}, noise=0.01)
    assert run("width-merge-accuracy", border)["verdict"] == "inconclusive"


def test_temperature_claim():
    t = barrier_table({1: 0.1, 4: 0.01}, {1: 1.0, 4: 0.8}, {1: 0.1, 4: 0.01})
    r = run("temperature-calibration", t)
    assert r["verdict"] == "supported" and r["statistic"] == pytest.approx(1 - 0.055 / 0.9, abs=0.01)
    same = barrier_table({1: 0.1, 4: 0.01}, {1: 1.0, 4: 0.8}, {1: 1.0, 4: 0.8})
    assert run("temperature-calibration", same)["verdict"] == "not_supported"


def test_bootstrap_ci_contains_statistic_and_shrinks():
    rng = np.random.default_rng(1)
    small = bootstrap_ci(rng.normal(1, 1, 5))
    big = bootstrap_ci(rng.normal(1, 1, 500))
    assert small[1] <= small[0] <= small[2] and big[1] <= big[0] <= big[2]
    assert (big[2] - big[1]) < (small[2] - small[1])


def test_verdict_logic():
    assert verdict_below((0.0, -0.1, 0.1), 0.2) == "supported"
    assert verdict_below((0.5, 0.3, 0.6), 0.2) == "not_supported"
    assert verdict_below((0.2, 0.1, 0.3), 0.2) == "inconclusive"
    assert combine("supported", "inconclusive") == "inconclusive"
    assert combine("supported", "not_supported") == "not_supported"


def test_table_claim_and_figure_jobs_do_not_import_torch():
    """About 60 jobs of the default run only read tables; torch's import (~2.5 s of CPU) stays out of them."""
    import subprocess
    import sys

    code = ("import sys, lmcflow.report_jobs, lmcflow.claims, lmcflow.tables, lmcflow.figures, lmcflow.metrics; "
            "assert 'torch' not in sys.modules, [m for m in sys.modules if m.startswith('torch')][:5]")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
