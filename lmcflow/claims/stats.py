"""Seed-level inference for claim statistics: the delete-one-seed jackknife over trained models.

``Sample``: per-seed or per-seed-pair values with labelled cell axes (``Cells``: means looked up by name);
``estimate``: a statistic of the means and its 95% interval (none below ``MIN_SEEDS`` seeds); trend
helpers ``trend_axis``, ``slope``, ``spearman``. Why the unit is the seed and not the pair, and the
estimator's formula and references: docs/claims.md.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

MIN_SEEDS = 4
LEVEL = 0.95
CI_METHOD = "delete-one-seed jackknife, t quantile on n_seeds - 1 df (Arvesen 1969)"


class Cells:
    """Means of a sample's cells looked up by label: ``m["lewc_cos", 4.0]`` is the mean of column
    ``lewc_cos`` at width 4. One key per axis (the value columns, then each cell column, as ``Sample.axes``
    names them): a label, a list of labels, or ``:`` for the whole axis; trailing axes stay whole. Returns
    numpy values."""

    def __init__(self, values: np.ndarray, axes: tuple):
        self.values, self.axes = values, axes

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > len(self.axes):
            raise IndexError(f"{len(key)} keys for axes {[name for name, _ in self.axes]}")
        return self.values[tuple(_position(axis, k) for axis, k in zip(self.axes, key))]

    def list(self, *key) -> list:
        """``self[key]`` as a (nested) Python list, for a claim's details."""
        return np.asarray(self[key]).tolist()


def _position(axis: tuple, key):
    name, labels = axis
    if isinstance(key, slice):
        if key != slice(None):
            raise KeyError(f"axis {name}: only ':' slices an axis; name its labels instead")
        return key
    if isinstance(key, (list, np.ndarray)):
        return [_position(axis, k) for k in key]
    try:
        return labels.index(key)
    except ValueError:
        raise KeyError(f"axis {name} has no label {key!r}; its labels: {list(labels)}") from None


@dataclass(frozen=True)
class Sample:
    """Values indexed by seed (``unit == "seed"``: shape (n, *cells)) or by seed pair (``unit == "pair"``:
    shape (n, n, *cells), symmetric, NaN on the diagonal and where a pair has no value). ``axes``: the name
    and labels of each cell axis, ((name, labels), …); with them a statistic reads ``Cells``."""

    seeds: tuple
    values: np.ndarray
    unit: str
    axes: tuple = ()

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @property
    def n_pairs(self) -> int:
        if self.unit != "pair":
            return 0
        iu = np.triu_indices(self.n_seeds, 1)
        flat = self.values[iu].reshape(len(iu[0]), -1)
        return int(np.sum(~np.all(np.isnan(flat), axis=1)))

    def means(self, keep: np.ndarray | None = None) -> np.ndarray:
        """Mean over the seeds in ``keep`` (default: all), or over the pairs among them; cells without a
        value in any of them are NaN."""
        idx = np.arange(self.n_seeds) if keep is None else np.asarray(keep)
        if self.unit == "seed":
            rows = self.values[idx]
        else:
            sub = self.values[np.ix_(idx, idx)]
            rows = sub[np.triu_indices(len(idx), 1)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)  # all-NaN cells stay NaN
            return np.nanmean(rows, axis=0)

    def cells(self, keep: np.ndarray | None = None):
        """``means(keep)`` as ``Cells`` (looked up by label) when the sample has labelled axes."""
        m = self.means(keep)
        return Cells(m, self.axes) if self.axes else m

    def restrict(self, seeds) -> Sample:
        """The same values for a subset of the seeds (in the given order)."""
        pos = [self.seeds.index(s) for s in seeds]
        vals = self.values[pos] if self.unit == "seed" else self.values[np.ix_(pos, pos)]
        return Sample(tuple(seeds), vals, self.unit, self.axes)


def common_seeds(*samples: Sample) -> list[Sample]:
    """The samples restricted to the seeds they all have (a statistic that mixes tables needs one set)."""
    seeds = [s for s in samples[0].seeds if all(s in o.seeds for o in samples[1:])]
    return [o.restrict(seeds) for o in samples]


@dataclass(frozen=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float
    n_seeds: int
    # the seeds and the delete-one-seed values of the jackknife (``estimate``), so two estimates over the same
    # seeds give the jackknife of their difference (``difference``); empty where no interval was formed
    seeds: tuple = field(default=(), compare=False, repr=False)
    loo: tuple = field(default=(), compare=False, repr=False)

    def has_ci(self) -> bool:
        return math.isfinite(self.ci_low) and math.isfinite(self.ci_high)

    def as_dict(self) -> dict:
        return {"statistic": _num(self.value), "ci_low": _num(self.ci_low), "ci_high": _num(self.ci_high)}


def _num(v: float):
    return float(v) if v is not None and math.isfinite(v) else None


def t_quantile(level: float, df: int) -> float:
    # scipy.stats is imported here, not at the top: it costs ~0.3 s and only claim jobs need it
    from scipy.stats import t

    return float(t.ppf((1 + level) / 2, df))


def estimate(fn, *samples: Sample, level: float = LEVEL) -> Estimate:
    """T = fn(means of each sample, as ``Cells``) and its delete-one-seed jackknife interval (NaN below
    MIN_SEEDS seeds).

    All samples must be indexed by the same seeds (``common_seeds``)."""
    seeds = samples[0].seeds
    if any(s.seeds != seeds for s in samples):
        raise ValueError("estimate: samples are indexed by different seeds; align them with common_seeds")
    value = float(fn(*[s.cells() for s in samples]))
    n = len(seeds)
    if n < MIN_SEEDS or not math.isfinite(value):
        return Estimate(value, math.nan, math.nan, n)
    everyone = np.arange(n)
    loo = np.array([float(fn(*[s.cells(np.delete(everyone, k)) for s in samples])) for k in range(n)])
    if not np.all(np.isfinite(loo)):
        return Estimate(value, math.nan, math.nan, n)
    return _jackknife(value, loo, tuple(seeds), level)


def interval(value, loo, level: float = LEVEL):
    """(low, high): T ± t_{n−1, (1+level)/2} · se, se² = (n − 1)/n Σ_k (T_(k) − mean T_(k))², from the statistic
    ``value`` and its delete-one-seed values ``loo`` (…, n); vectorised over leading axes (the coverage
    simulation in tests/test_claim_statistics.py runs thousands of studies through it at once)."""
    value, loo = np.asarray(value, dtype=float), np.asarray(loo, dtype=float)
    n = loo.shape[-1]
    se = np.sqrt((n - 1) / n * np.sum((loo - loo.mean(axis=-1, keepdims=True)) ** 2, axis=-1))
    half = t_quantile(level, n - 1) * se
    return value - half, value + half


def _jackknife(value: float, loo: np.ndarray, seeds: tuple, level: float) -> Estimate:
    low, high = interval(value, loo, level)
    return Estimate(value, float(low), float(high), len(loo), seeds, tuple(float(v) for v in loo))


def difference(a: Estimate, b: Estimate, level: float = LEVEL) -> Estimate:
    """a − b with the jackknife interval of the difference: both estimates must carry delete-one-seed values
    over the same seeds (dropping seed s from both at once: a real pair and its null-partner pair share the
    seed index); otherwise the difference has no interval."""
    value = a.value - b.value
    if not (a.loo and b.loo) or a.seeds != b.seeds or not math.isfinite(value):
        return Estimate(value, math.nan, math.nan, min(a.n_seeds, b.n_seeds))
    return _jackknife(value, np.asarray(a.loo) - np.asarray(b.loo), a.seeds, level)


# --------------------------------------------------------------------------- trends over a grid
def trend_axis(values) -> tuple[np.ndarray, str]:
    """x coordinates of a grid for a trend: log2 of the values when all are positive (widths, k, ν),
    else the grid rank 0, 1, 2, … (σ_F grids contain 0)."""
    v = np.asarray(values, dtype=float)
    if np.all(v > 0):
        return np.log2(v), "log2"
    return np.argsort(np.argsort(v)).astype(float), "rank"


def slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of y on x (NaN when y has a NaN or x is constant)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    xc = x - x.mean()
    den = float(xc @ xc)
    if den == 0 or not np.all(np.isfinite(y)):
        return math.nan
    return float(xc @ (y - y.mean()) / den)


def spearman(x, y) -> float:
    """Spearman rank correlation of two short sequences (ties averaged); NaN if either is constant."""
    from scipy.stats import spearmanr  # lazy, as in t_quantile

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0 or not np.all(np.isfinite(y)):
        return math.nan
    return float(spearmanr(x, y).statistic)
