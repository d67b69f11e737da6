"""Extension claims (lmcflow.claims.width_extensions): REPAIR vs calibration and the N-model average vs ensemble
pass and fail on hand-built tables with the real schemas, their controls bite, and broken endpoints stop them."""
import itertools

import numpy as np
import pytest

from lmcflow.claims.width_extensions import subset_estimate
from tests.claim_tables import SEEDS, WIDTHS, Noise, pair_rows, table, verdict, working_runs


def repair_barriers(removed_widest: dict, repair_narrowest: float = 0.5):
    """Loss barriers: plain 1.0 at every width; at the widest width calibration / REPAIR / both leave
    1 − removed; narrower widths: REPAIR removes ``repair_narrowest``, calibration nothing."""
    def values(width, repair, calibrated):
        if not repair and not calibrated:
            return {"value": 1.0}
        arm = "both" if repair and calibrated else "repair" if repair else "calibration"
        if width == WIDTHS[-1]:
            return {"value": 1.0 - removed_widest[arm]}
        return {"value": 1.0 - (repair_narrowest if repair else 0.0)}
    rows = pair_rows({"width": WIDTHS, "repair": [False, True], "calibrated": [False, True]}, values,
                     Noise(0.01, 0.01), metric="loss", definition="entezari", point="p")
    return {"barriers": table("barriers", rows)}


def test_repair_vs_calibration_holds_where_calibration_removes_as_much_as_repair():
    res = verdict("repair-vs-calibration", repair_barriers({"calibration": 0.9, "repair": 0.8, "both": 0.95}))
    assert res["verdict"] == "supported"
    assert res["statistic"] == pytest.approx(0.1, abs=0.03)
    assert res["reported"]["removed_by_both_widest"]["statistic"] == pytest.approx(0.95, abs=0.03)


def test_repair_vs_calibration_fails_where_repair_removes_far_more():
    res = verdict("repair-vs-calibration", repair_barriers({"calibration": 0.3, "repair": 0.9, "both": 0.9}))
    assert res["verdict"] == "not_supported"
    assert res["statistic"] == pytest.approx(-0.6, abs=0.03)


def test_repair_vs_calibration_control_a_repair_that_does_nothing_decides_nothing():
    """REPAIR that removes nothing anywhere (e.g. it never ran) would let any calibration 'match' it."""
    res = verdict("repair-vs-calibration", repair_barriers({"calibration": 0.2, "repair": 0.0, "both": 0.2},
                                                           repair_narrowest=0.0))
    crit = {c["name"]: c["verdict"] for c in res["criteria"]}
    assert crit["calibration_minus_repair_widest"] == "supported"
    assert crit["repair_removes_narrowest"] != "supported" and res["verdict"] != "supported"


def test_repair_vs_calibration_is_not_decided_on_a_broken_endpoint():
    tables = repair_barriers({"calibration": 0.9, "repair": 0.8, "both": 0.95})
    runs = working_runs(tables)
    runs.loc[runs.seed == 5, "test_acc"] = 0.1  # B untrained: at chance
    res = verdict("repair-vs-calibration", {**tables, "runs": runs})
    assert res["verdict"] == "inconclusive" and "endpoint" in res["reason"]


def many_rows(gap, gain, n=3, seed=0):
    """merge_many rows: every n-subset of the seeds at every width; ensemble loss 0.3, mean endpoint + gain(w),
    merged + gap(w), with a per-seed effect on the gap and per-subset noise."""
    rng = np.random.default_rng(seed)
    u = rng.normal(0, 0.01, len(SEEDS))
    rows = []
    for width, subset in itertools.product(WIDTHS, itertools.combinations(SEEDS, n)):
        g = gap(width) + sum(u[s] for s in subset) / n + rng.normal(0, 0.005)
        for calibrated in (False, True):
            rows.append({"point": f"w{width}", "width": width, "seeds": ",".join(map(str, subset)), "n_models": n,
                         "method": "identity", "repair": False, "calibrated": calibrated,
                         "ensemble_test_loss": 0.3, "endpoint_test_loss": 0.3 + gain(width),
                         "merged_test_loss": 0.3 + g, "merged_test_error": 0.1, "ensemble_test_error": 0.08})
    return table("merge_many", rows)


def many_tables(gap, gain):
    many = many_rows(gap, gain)
    runs = table("runs", [{"study": "s", "point": p, "seed": s, "epochs": 1, "test_acc": 0.9, "test_loss": 0.3}
                          for p in sorted(set(many.point)) for s in SEEDS])
    return {"merge_many": many, "runs": runs}


def test_many_model_ensemble_holds_where_the_average_closes_on_the_ensemble():
    gaps = dict(zip(WIDTHS, (0.5, 0.2, 0.05), strict=True))
    res = verdict("many-model-ensemble", many_tables(gaps.get, lambda w: 0.1))
    assert res["verdict"] == "supported" and res["statistic"] < 0
    assert res["details"]["mean_gap_by_width"] == pytest.approx([0.5, 0.2, 0.05], abs=0.02)


def test_many_model_ensemble_fails_where_the_gap_grows():
    gaps = dict(zip(WIDTHS, (0.05, 0.2, 0.5), strict=True))
    assert verdict("many-model-ensemble", many_tables(gaps.get, lambda w: 0.1))["verdict"] == "not_supported"


def test_many_model_ensemble_control_every_loss_shrinking_alike_is_not_enough():
    scale = dict(zip(WIDTHS, (1.0, 0.4, 0.1), strict=True))
    res = verdict("many-model-ensemble", many_tables(lambda w: 0.5 * scale[w], lambda w: 0.1 * scale[w]))
    crit = {c["name"]: c["verdict"] for c in res["criteria"]}
    assert crit["gap_trend"] == "supported" and crit["relative_gap_trend"] != "supported"
    assert res["verdict"] != "supported"


def test_subset_jackknife_drops_every_subset_holding_the_seed():
    df = many_rows(lambda w: 0.2, lambda w: 0.1)
    df = df[(df.width == WIDTHS[0]) & ~df.calibrated]
    seen = []

    def mean_gap(rows):
        seen.append(set().union(*[{int(v) for v in s.split(",")} for s in rows.seeds]))
        return float((rows.merged_test_loss - rows.ensemble_test_loss).mean())

    est = subset_estimate(mean_gap, df, list(SEEDS))
    assert est.has_ci() and est.ci_low < est.value < est.ci_high
    assert seen[0] == set(SEEDS) and all(k not in seen[1 + i] for i, k in enumerate(SEEDS))
