"""Seed-level inference (lmcflow.claims.stats): the delete-one-seed jackknife interval covers a known truth
at the nominal rate in all-pairs designs, where the old percentile bootstrap over pairs does not."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest

from lmcflow.claims import stats
from lmcflow.claims.core import pivot
from lmcflow.claims.stats import Sample, estimate, slope
from tests.claim_tables import Noise, pair_rows, table, verdict

N_STUDIES = 400
TRUTH = 1.0


def all_pairs_study(rng, n: int, seed_sd: float = 1.0, pair_sd: float = 0.5) -> np.ndarray:
    """h(i, j) = truth + u_i + u_j + e_ij for every pair of n seeds (u: per-seed random effect)."""
    u = rng.normal(0, seed_sd, n)
    h = np.full((n, n, 1), np.nan)
    for i, j in itertools.combinations(range(n), 2):
        h[i, j, 0] = h[j, i, 0] = TRUTH + u[i] + u[j] + rng.normal(0, pair_sd)
    return h


def pair_bootstrap_ci(h: np.ndarray, rng, n_boot: int = 2000) -> tuple[float, float]:
    """The interval claims used before: percentile bootstrap treating the pairs as independent."""
    v = h[np.triu_indices(len(h), 1)][:, 0]
    means = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    return tuple(np.quantile(means, [0.025, 0.975]))


def coverage(n: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    jack = boot = 0
    for _ in range(N_STUDIES):
        h = all_pairs_study(rng, n)
        e = estimate(lambda m: m[0], Sample(tuple(range(n)), h, "pair"))
        jack += e.ci_low <= TRUTH <= e.ci_high
        lo, hi = pair_bootstrap_ci(h, rng)
        boot += lo <= TRUTH <= hi
    return jack / N_STUDIES, boot / N_STUDIES


@pytest.mark.parametrize("n,minimum", [(5, 0.90), (8, 0.92)])
def test_jackknife_covers_the_truth_in_all_pairs_designs(n, minimum, capsys):
    jack, boot = coverage(n, seed=n)
    with capsys.disabled():
        print(f"\n{n} seeds, {N_STUDIES} simulated studies: nominal 95% interval covers the truth "
              f"{jack:.1%} (seed jackknife) vs {boot:.1%} (old percentile bootstrap over pairs)")
    assert jack >= minimum
    assert boot < 0.8  # the old interval treats the shared-model pairs as independent


def test_jackknife_covers_a_trend_over_the_grid():
    """Slope against log2 width with per-seed random intercepts and slopes (the trend tests)."""
    rng = np.random.default_rng(1)
    x = np.log2([0.25, 1.0, 4.0])
    n, hits = 5, 0
    for _ in range(N_STUDIES):
        u, v = rng.normal(0, 0.5, n), rng.normal(0, 0.2, n)
        h = np.full((n, n, 3), np.nan)
        for i, j in itertools.combinations(range(n), 2):
            h[i, j] = h[j, i] = 1.0 - 0.3 * x + u[i] + u[j] + (v[i] + v[j]) * x + rng.normal(0, 0.3, 3)
        e = estimate(lambda m: slope(x, m), Sample(tuple(range(n)), h, "pair"))
        hits += e.ci_low <= -0.3 <= e.ci_high
    assert hits / N_STUDIES >= 0.90


def test_per_model_jackknife_is_the_t_interval():
    """For a plain mean over seeds the jackknife equals the classical t interval."""
    v = np.array([0.81, 0.84, 0.79, 0.86, 0.83])
    e = estimate(lambda m: m[0], Sample(tuple(range(5)), v[:, None], "seed"))
    half = stats.t_quantile(0.95, 4) * v.std(ddof=1) / math.sqrt(5)
    assert e.value == pytest.approx(v.mean()) and e.ci_high - e.value == pytest.approx(half)


def test_dropping_a_seed_drops_its_pairs():
    """One model that merges badly with every partner widens the interval (it is one unit, not n − 1)."""
    rng = np.random.default_rng(3)
    h = all_pairs_study(rng, 6, seed_sd=0.0, pair_sd=0.01)
    calm = estimate(lambda m: m[0], Sample(tuple(range(6)), h, "pair"))
    h[0, 1:, 0] += 1.0
    h[1:, 0, 0] += 1.0
    outlier = estimate(lambda m: m[0], Sample(tuple(range(6)), h, "pair"))
    assert (outlier.ci_high - outlier.ci_low) > 20 * (calm.ci_high - calm.ci_low)


def test_fewer_than_four_seeds_give_no_interval_and_an_inconclusive_claim():
    h = all_pairs_study(np.random.default_rng(0), 3)
    e = estimate(lambda m: m[0], Sample((0, 1, 2), h, "pair"))
    assert math.isfinite(e.value) and math.isnan(e.ci_low) and math.isnan(e.ci_high)
    rows = [r for r in pair_rows({"width": [0.25, 4.0], "definition": ["midpoint"]},
                                 lambda width, definition: {"value": 0.001}, Noise(0.0, 1e-4), metric="error")
            if r["seed_a"] < 3 and r["seed_b"] < 3]
    res = verdict("width-merge-accuracy", {"barriers": table("barriers", rows)})
    assert res["verdict"] == "inconclusive" and res["reason"].startswith("too few seeds")
    assert res["n_seeds"] == 3 and res["ci_low"] is None and res["ci_high"] is None
    assert all(t["verdict"] == "inconclusive" for t in res["criteria"])


def test_samples_must_share_seeds():
    a = Sample((0, 1, 2, 3), np.zeros((4, 1)), "seed")
    b = Sample((0, 1, 2, 4), np.zeros((4, 1)), "seed")
    with pytest.raises(ValueError, match="common_seeds"):
        estimate(lambda x, y: x[0], a, b)
    a2, b2 = stats.common_seeds(a, b)
    assert a2.seeds == b2.seeds == (0, 1, 2)


def test_a_statistic_reads_its_means_by_label():
    """pivot labels every axis: a statistic names the value column and the cells it reads; a position, a label the
    table lacks or a positional slice is an error, never a silent read of another cell."""
    rows = [{"seed": s, "arm": arm, "width": w, "acc": 10 * s + w + (0.5 if arm == "weak" else 0.0), "loss": -w}
            for s in range(5) for arm in ("weak", "default") for w in (4.0, 1.0)]
    sample, lab = pivot(pd.DataFrame(rows), ["acc", "loss"], ["arm", "width"], unit="seed")
    assert lab == {"arm": ["default", "weak"], "width": [1.0, 4.0]}
    m = sample.cells()
    assert m["acc", "weak", 4.0] == 24.5 and m["acc", "default", 1.0] == 21.0 and m["loss", "weak", 4.0] == -4.0
    assert m["acc", "weak"].tolist() == [21.5, 24.5] and m.list("acc", "default", [4.0, 1.0]) == [24.0, 21.0]
    assert m["loss"].shape == (2, 2) and m["acc", :, 4.0].tolist() == [24.0, 24.5]
    for bad in ((0,), ("acc", 0, 4.0), ("acc", "strong"), ("acc", "weak", 2.0)):
        with pytest.raises(KeyError):
            m[bad]
    with pytest.raises(KeyError, match="only ':'"):
        m["acc", "weak", 1:]
    e = estimate(lambda m: m["acc", "weak", 4.0] - m["acc", "default", 4.0], sample)
    assert e.value == pytest.approx(0.5) and e.n_seeds == 5
    assert estimate(lambda m: m["acc", "weak", 4.0], sample.restrict((0, 1, 2, 3))).value == pytest.approx(19.5)


def test_trend_axis_uses_log2_or_rank():
    assert stats.trend_axis([0.25, 1.0, 4.0])[1] == "log2"
    x, axis = stats.trend_axis([0.0, 0.3, 1.0, 3.0])
    assert axis == "rank" and x.tolist() == [0.0, 1.0, 2.0, 3.0]
