"""Seed-level inference (lmcflow.claims.stats): the delete-one-seed jackknife interval covers a known truth
at the nominal rate in all-pairs designs with per-seed effects, for the non-smooth statistics the claims use
(a level, the worst λ, a ratio of means, a trend, a fitted decay exponent), where the old percentile
bootstrap over pairs does not; where pair residuals dominate it is conservative. Vectorised: thousands of
simulated studies go through ``stats.interval`` at once (the same function ``stats.estimate`` uses)."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest

from lmcflow.claims import stats
from lmcflow.claims.core import pivot
from lmcflow.claims.stats import Sample, estimate
from lmcflow.claims.width import fitted_decay_exponent, lewc_logit_ratio
from tests.claim_tables import Noise, pair_rows, table, verdict

N_STUDIES = 4000
N_SEEDS = 5
TRUTH = 1.0
LAMS = np.linspace(0, 1, 7)
X = np.log2([0.0625, 0.25, 1.0])


def simulate(rng, mu, seed_sd: float, pair_sd: float, shared: float, n_studies: int = N_STUDIES,
             n: int = N_SEEDS) -> np.ndarray:
    """(studies, n, n, cells) all-pairs tables h(i, j) = mu + seed_sd·(a_i + 0.7·b_j) + e_ij for i < j: seed i
    is model A of the pair, j model B, with role effects a (as A) and b (as B) correlated 0.6, skewed
    (centred Gamma(2)), a fraction ``shared`` of their variance common to all cells (λ of the same models)
    and the rest per cell (widths: other models), and heavy-tailed pair residuals e (t with 5 df)."""
    mu = np.asarray(mu, dtype=float)
    iu = np.triu_indices(n, 1)

    def effect():
        def gamma(shape):
            return (rng.gamma(2.0, 1.0, shape) - 2.0) / math.sqrt(2)
        return math.sqrt(shared) * gamma((n_studies, n, 1)) + math.sqrt(1 - shared) * gamma((n_studies, n, len(mu)))

    a = effect()
    b = 0.6 * a + 0.8 * effect()
    e = pair_sd * rng.standard_t(5, (n_studies, len(iu[0]), len(mu))) / math.sqrt(5 / 3)
    h = np.full((n_studies, n, n, len(mu)), np.nan)
    h[:, iu[0], iu[1]] = h[:, iu[1], iu[0]] = mu + seed_sd * (a[:, iu[0]] + 0.7 * b[:, iu[1]]) + e
    return h


def pair_means(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Means over all pairs (studies, cells) and without each seed's pairs (studies, n, cells)."""
    n = h.shape[1]
    iu = np.triu_indices(n, 1)
    total = h[:, iu[0], iu[1]].sum(axis=1)
    own = np.nansum(h, axis=2)  # the sum over each seed's n − 1 pairs
    return total / len(iu[0]), (total[:, None] - own) / (len(iu[0]) - (n - 1))


def coverage(statistic, truth: float, h: np.ndarray) -> float:
    full, loo = pair_means(h)
    low, high = stats.interval(statistic(full), statistic(loo))
    return float(np.mean((low <= truth) & (truth <= high)))


def trend(m):
    xc = X - X.mean()
    return (m * xc).sum(axis=-1) / (xc @ xc)


def exponent(m):
    return fitted_decay_exponent(LAMS, m / (0.5 * (m[..., :1] + m[..., -1:])))


BARRIERS = [0.23, 0.067, 0.029]  # the default run's midpoint barriers by width
COSINES = [0.965, 0.97, 0.99]  # cosines at λ = ¼, ½, ¾: two close cells, so the worst λ is non-smooth
NORMS = 2 * lewc_logit_ratio(LAMS, 3)  # logit norms along λ of a 3-layer network (LEWC's decay)
# (name, statistic, cell means, true value, seed sd, fraction of the seed effect shared by the cells)
STATISTICS = [
    ("level at the widest width", lambda m: m[..., 2], BARRIERS, BARRIERS[2], 0.01, 0.0),
    ("worst λ", lambda m: m.min(axis=-1), COSINES, min(COSINES), 0.01, 0.8),
    ("ratio of means", lambda m: m[..., 2] / m[..., 1], BARRIERS, BARRIERS[2] / BARRIERS[1], 0.01, 0.0),
    ("trend over log2 width", trend, BARRIERS, float(trend(np.array(BARRIERS))), 0.01, 0.0),
    ("fitted decay exponent", exponent, NORMS, float(exponent(NORMS)), 0.1, 0.8),
]


@pytest.mark.parametrize("name,statistic,mu,truth,seed_sd,shared", STATISTICS, ids=[s[0] for s in STATISTICS])
def test_jackknife_covers_the_truth_at_5_seeds(name, statistic, mu, truth, seed_sd, shared, capsys):
    """Per-seed effects with pair residuals half their size: 2000 studies of 5 seeds, nominal 95%."""
    h = simulate(np.random.default_rng(7), mu, seed_sd, 0.5 * seed_sd, shared)
    c = coverage(statistic, truth, h)
    with capsys.disabled():
        print(f"\n{name}: the 95% seed jackknife interval covers the truth in {c:.1%} of {N_STUDIES} studies")
    assert 0.93 <= c <= 0.97


@pytest.mark.parametrize("name,statistic,mu,truth,seed_sd,shared", STATISTICS[:4], ids=[s[0] for s in STATISTICS[:4]])
def test_jackknife_is_conservative_where_pair_residuals_dominate(name, statistic, mu, truth, seed_sd, shared):
    """No per-seed effect, pair residuals only (most pair statistics of the default run look like this: their
    seed effects are within the noise of the pair residuals): the jackknife counts the residual variance
    2(n − 1)/(n − 2) times (docs/claims.md), so the interval covers more than 95%, never less."""
    h = simulate(np.random.default_rng(8), mu, 0.0, seed_sd, shared)
    assert coverage(statistic, truth, h) >= 0.975


def test_the_old_pair_bootstrap_undercovers():
    """The interval claims used before, a percentile bootstrap that treats the shared-model pairs as independent."""
    rng = np.random.default_rng(5)
    h = simulate(rng, [TRUTH], 1.0, 0.5, 1.0)
    iu = np.triu_indices(N_SEEDS, 1)
    v = h[:, iu[0], iu[1], 0]
    draws = rng.integers(0, v.shape[1], size=(500, v.shape[1]))
    boot = v[:, draws].mean(axis=-1)
    low, high = np.quantile(boot, [0.025, 0.975], axis=1)
    assert np.mean((low <= TRUTH) & (TRUTH <= high)) < 0.8
    assert coverage(lambda m: m[..., 0], TRUTH, h) >= 0.93


def test_estimate_is_the_vectorised_interval():
    """``estimate`` on labelled samples gives what the simulation computes for the same studies."""
    h = simulate(np.random.default_rng(9), COSINES, 0.01, 0.005, 0.8, n_studies=20)
    full, loo = pair_means(h)
    low, high = stats.interval(full.min(axis=-1), loo.min(axis=-1))
    for k in range(20):
        sample = Sample(tuple(range(N_SEEDS)), h[k][:, :, None, :], "pair",
                        (("value", ("cos",)), ("lam", (0.25, 0.5, 0.75))))
        e = estimate(lambda m: m["cos"].min(), sample)
        assert (e.ci_low, e.ci_high) == pytest.approx((low[k], high[k]), rel=1e-9, abs=1e-12)


def all_pairs_study(rng, n: int, seed_sd: float = 1.0, pair_sd: float = 0.5) -> np.ndarray:
    """h(i, j) = truth + u_i + u_j + e_ij for every pair of n seeds (u: per-seed random effect)."""
    u = rng.normal(0, seed_sd, n)
    h = np.full((n, n, 1), np.nan)
    for i, j in itertools.combinations(range(n), 2):
        h[i, j, 0] = h[j, i, 0] = TRUTH + u[i] + u[j] + rng.normal(0, pair_sd)
    return h


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
    rows = [r for r in pair_rows({"width": [0.25, 4.0], "lam": [0.0, 0.5, 1.0]},
                                 lambda width, lam: {"error": 0.1 + (0.001 if lam == 0.5 else 0.0)},
                                 Noise(0.0, 1e-4))
            if r["seed_a"] < 3 and r["seed_b"] < 3]
    res = verdict("width-merge-accuracy", {"interpolation": table("interpolation", rows)})
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
