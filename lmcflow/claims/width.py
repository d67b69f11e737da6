"""The width paper (Ito et al., ICLR 2026, arXiv 2510.08023): what its claims share.

Its Table 1 (``TABLE1_ROWS``, also ``lmcflow.paper_table1``), the config requirements and table selections
its claims use, the τ sweep of active-unit overlaps (``tau_sweep``), and LEWC's prediction of the logit norm
along the path (``lewc_logit_ratio``, also drawn by ``lmcflow.figures``). The claims themselves:
``width_merging`` (barriers, calibration, alignment, weight decay) and ``width_mechanism`` (LEWC and the mechanism
behind it); what each measures: docs/claims.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmcflow.claims.core import PaperValue, need, pivot, select
from lmcflow.claims.regime import Regime, register
from lmcflow.claims.stats import estimate, trend_axis
from lmcflow.config import ConfigError, mechanism_lambdas, mechanism_methods, same_value

PAPER = "Ito et al., ICLR 2026 (arXiv 2510.08023)"
TABLE1 = "Ito et al. 2026, Table 1 (λ = ½ error barrier; as a fraction of test error, 0.0052 = 0.52%)"
WD = {"weight_decay": "train.weight_decay"}
MECH = {"method": "identity", "weight_decay": 3.0e-3}
# every width-paper claim: endpoint gate, convergence gate and a one-sided null control
WIDTH_CLAIM = {"gate_endpoints": True, "converged": True, "null_control": "one_sided"}


@dataclass(frozen=True)
class Table1Row:
    """One row of the paper's Table 1: the midpoint (λ = ½) test error barrier of the plain average and with
    weight matching, at the widest width the paper trained (fractions of test error: 0.0052 = 0.52%)."""

    arch: str
    dataset: str
    width: float
    plain: float
    weight_matching: float
    label: str

    def value(self, method: str) -> float:
        return {"identity": self.plain, "weight_matching": self.weight_matching}[method]


TABLE1_ROWS = (
    Table1Row("mlp", "mnist", 16.0, 0.0052, -0.0003, "MLP, 16x width, MNIST"),
    Table1Row("vgg11", "cifar10", 16.0, 0.0131, 0.0700, "VGG-11, 16x width, CIFAR-10"),
    Table1Row("resnet20", "cifar10", 32.0, 0.0269, 0.0514, "ResNet-20, 32x width, CIFAR-10"),
)


register(PAPER, Regime({r.arch: r.width for r in TABLE1_ROWS},
                        "Ito et al. 2026: the claims are made for sufficiently wide models (16x or 32x); Table 1 "
                        "at MLP 16x, VGG-11 16x, ResNet-20 32x (width multipliers 0.125x … 32x studied)"))


def table1_values(quantity: str, ours: str, value) -> tuple:
    """A claim's ``paper_values``: ``value(row)`` of every Table-1 row, shown beside the study of its architecture,
    comparable only to a study of its dataset and widest width."""
    return tuple(PaperValue(quantity, value(r), r.label, TABLE1, ours, {"arch": r.arch},
                            {"dataset": r.dataset, "arch": r.arch, "width": r.width}) for r in TABLE1_ROWS)


# --------------------------------------------------------------------------- config requirements
def arm_points(points: list, weight_decay) -> list:
    """The points trained with ``weight_decay`` (all of them for None)."""
    return [q for q in points if weight_decay is None or same_value(q.train["weight_decay"], weight_decay)]


def requires_mechanism(*wd_params: str, lam: bool = True, interior: bool = False):
    """analysis.mechanism must cover ``method`` at every point of each weight-decay arm the claim reads, with
    λ = ``lam`` (``lam``) and/or a λ in (0, 1) other than ½ (``interior``: LEWC against LLFC)."""
    def check(cid, p, study, points) -> None:
        for param in wd_params:
            arm = arm_points(points, p.get(param))
            missing = [q.point for q in arm if p["method"] not in mechanism_methods(q)]
            if missing:
                raise ConfigError(
                    f"claims.{cid}: needs mechanism metrics for method {p['method']!r} at points {missing} of "
                    f"study {study!r}: set studies.{study}.analysis.mechanism.methods to include it")
            for q in arm:
                lams = mechanism_lambdas(q)
                if lam and not any(same_value(p["lam"], v) for v in lams):
                    raise ConfigError(f"claims.{cid}: reads λ = {p['lam']} but analysis.mechanism.lambdas of "
                                      f"study {study!r} (point {q.point}) does not contain it")
                if interior and not [v for v in lams if 0 < v < 1 and not same_value(v, 0.5)]:
                    raise ConfigError(f"claims.{cid}: compares LEWC with LLFC, which needs a λ in (0, 1) other "
                                      f"than ½; analysis.mechanism.lambdas of study {study!r} (point {q.point}) "
                                      f"has {lams}")
    return check


# --------------------------------------------------------------------------- table selections
def error_barriers(t: dict, p: dict, weight_decay, **more):
    """Raw error barriers (``barriers``, metric error, uncalibrated) of split ``p["split"]`` and one arm."""
    return select(t["barriers"], metric="error", calibrated=False, split=p["split"], weight_decay=weight_decay,
                  **more)


def layer_rows(t: dict, p: dict, weight_decay, lam=None):
    """``layer_metrics`` of method ``p["method"]``, one arm, layers ≥ ``p["min_layer"]`` (and λ = ``lam``)."""
    df = select(t["layer_metrics"], method=p["method"], weight_decay=weight_decay)
    df = df[df.layer >= int(p["min_layer"])]
    return select(df, lam_paper=float(lam)) if lam is not None else df


def interior(df):
    """The rows at λ in (0, 1) other than ½ (where LEWC's target is a multiple of LLFC's)."""
    lam = df.lam_paper.to_numpy(dtype=float)
    return df[(lam > 0) & (lam < 1) & ~np.isclose(lam, 0.5)]


def with_arms(p: dict, frame):
    """``frame(weight_decay)`` for the default and the weak arm, with an ``arm`` column ("default", "weak")."""
    return pd.concat([frame(p["weight_decay"]).assign(arm="default"),
                      frame(p["weak_weight_decay"]).assign(arm="weak")])


def widest_common(df) -> float:
    """The widest width both weight-decay arms of ``with_arms`` have."""
    both = sorted(set(df[df.arm == "default"].width) & set(df[df.arm == "weak"].width))
    need(bool(both), "no width that both weight-decay arms have")
    return both[-1]


def over_widths(df, columns: list, requirement: str):
    """(pair sample of ``columns`` by width, the widths, their trend axis); ≥ 2 widths, else ``requirement``."""
    sample, lab = pivot(df, columns, ["width"])
    widths = lab["width"]
    need(len(widths) >= 2, requirement)
    x, _ = trend_axis(widths)
    return sample, widths, x


# --------------------------------------------------------------------------- LEWC's logit norm
WEIGHT_LAYERS = {"mlp": lambda depth: depth + 1, "vgg11": lambda depth: 9, "resnet20": lambda depth: 20}


def n_weight_layers(arch: str, depth: int) -> int:
    """D, the weight layers from the input to the logits (MLP: hidden layers + head; VGG-11: 8 convs + head;
    ResNet-20: 19 main-path convs + head): LEWC scales the logits of θ_λ by λ^D + (1 − λ)^D."""
    return WEIGHT_LAYERS[arch](int(depth))


def lewc_logit_ratio(lam, depth) -> np.ndarray:
    """LEWC's logit norm of θ_λ relative to the endpoints' mean, for parallel endpoint logits of equal norm:
    λ^D + (1 − λ)^D."""
    lam = np.asarray(lam, dtype=float)
    return lam ** depth + (1 - lam) ** depth


def fitted_decay_exponent(lam, ratio, bounds=(0.25, 64.0), xtol: float = 1e-6):
    """D̂: the exponent whose λ^D + (1 − λ)^D fits the measured relative logit norms best (least squares on the log
    scale, interior λ), in ``bounds``; NaN if a ratio is not positive. Vectorised: ``ratio`` (…, len(lam)) gives
    one exponent per leading index (golden-section search, the loss is unimodal in D), a float for one curve."""
    lam, ratio = np.asarray(lam, dtype=float), np.asarray(ratio, dtype=float)
    inside = (lam > 0) & (lam < 1)
    lam, ratio = lam[inside], ratio[..., inside]
    if not len(lam):
        return float("nan")
    ok = np.all(ratio > 0, axis=-1)
    target = np.log(np.where(ratio > 0, ratio, 1.0))

    def loss(d):
        return np.sum((np.log(lewc_logit_ratio(lam, d[..., None])) - target) ** 2, axis=-1)

    invphi = (np.sqrt(5.0) - 1) / 2
    lo, hi = np.full(ok.shape, bounds[0]), np.full(ok.shape, bounds[1])
    c, d = hi - invphi * (hi - lo), lo + invphi * (hi - lo)
    fc, fd = loss(c), loss(d)
    while np.max(hi - lo) > xtol:
        left = fc < fd  # the minimum lies in [lo, d]: d becomes the upper end, c the new d
        lo, hi = np.where(left, lo, c), np.where(left, d, hi)
        c_left, d_right = hi - invphi * (hi - lo), lo + invphi * (hi - lo)
        c, d, fc, fd = (np.where(left, c_left, d), np.where(left, c, d_right),
                        np.where(left, loss(c_left), fd), np.where(left, fc, loss(d_right)))
    out = np.where(ok, (lo + hi) / 2, np.nan)
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------- the merge against both endpoints
def path_ends(t: dict, p: dict, weight_decay, column: str = "error", methods=None):
    """Per seed pair, width and merge method (``interpolation``, split ``p["split"]``, one weight-decay arm), the
    column at the two endpoints and the midpoint: ``end_0``, ``end_1``, ``mid``, and what the width claims read:
    ``gap`` = max(|mid − end_0|, |mid − end_1|), the midpoint's distance from the farther endpoint ("accuracy equal
    to the originals": both of them), ``ends_gap`` = |end_0 − end_1| and ``barrier`` = mid − ½(end_0 + end_1).
    A useless partner B (at chance, untrained or collapsed) is far from A and from the merge: its ``gap`` and
    ``ends_gap`` are large whatever the merge does."""
    need("interpolation" in t and len(t["interpolation"]), "interpolation rows (the merge's path) of the pairs")
    df = select(t["interpolation"], split=p.get("split", "test"), weight_decay=weight_decay)
    if methods is not None:
        df = df[df.method.isin(list(methods))]
    lam = df.lam.to_numpy(dtype=float)
    df = df[np.isclose(lam, 0.0) | np.isclose(lam, 0.5) | np.isclose(lam, 1.0)].assign(
        end=lambda d: np.select([np.isclose(d.lam, 0.0), np.isclose(d.lam, 1.0)], ["end_0", "end_1"], "mid"))
    keys = ["seed_a", "seed_b", "width", "method"] + (["point"] if "point" in df.columns else [])
    wide = df.pivot_table(index=keys, columns="end", values=column, aggfunc="mean").reset_index()
    need(all(c in wide.columns for c in ("end_0", "end_1", "mid")) and len(wide),
         f"{column} at λ = 0, ½ and 1 of the interpolation path")
    return wide.assign(gap=lambda d: np.maximum((d.mid - d.end_0).abs(), (d.mid - d.end_1).abs()),
                       ends_gap=lambda d: (d.end_0 - d.end_1).abs(),
                       barrier=lambda d: d.mid - (d.end_0 + d.end_1) / 2)


def upper_widths(widths: list, from_width: float) -> list:
    """The widths a trend is taken over: those ≥ ``from_width`` (×1), or the two widest where fewer lie there."""
    up = [w for w in widths if w >= from_width - 1e-12]
    return up if len(up) >= 2 else list(widths[-2:])


def tau_sweep(df, p: dict, widest: float) -> tuple[dict, dict]:
    """The overlap's excess over independent placement and the active fraction at the widest width for every τ of
    the ``active_overlap`` table (reported: the verdict is at the study's stated τ), and their means by width."""
    if df is None or not len(df):
        return {}, {}
    df = select(df, method=p["method"], weight_decay=p["weight_decay"])
    df = df[df.layer >= int(p["min_layer"])].assign(
        excess=lambda d: d.active_jaccard - d.active_jaccard_independent,
        frac_active=lambda d: (d.frac_active_a + d.frac_active_b) / 2)
    if not len(df) or not np.any(np.isclose(df.width.to_numpy(float), widest)):
        return {}, {}
    sample, lab = pivot(df, ["excess", "frac_active", "active_jaccard"], ["active_threshold", "width"])
    reported, details = {}, {}
    means = sample.cells()
    for tau in lab["active_threshold"]:
        at = lambda column, tau=tau: estimate(lambda m: m[column, tau, widest], sample)
        reported[f"excess_over_independent_tau_{tau:g}"] = at("excess")
        reported[f"active_fraction_tau_{tau:g}"] = at("frac_active")
        details[f"{tau:g}"] = {"widths": lab["width"], "mean_excess_by_width": means.list("excess", tau),
                               "mean_active_fraction_by_width": means.list("frac_active", tau),
                               "mean_jaccard_by_width": means.list("active_jaccard", tau)}
    return reported, details
