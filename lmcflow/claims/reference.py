"""The same-run random-feature reference of the width mechanism claims: their statistic on pairs (A, untrained B).

An untrained B of the same architecture and width is a random-feature model: full-rank weights at their initial
scale. A wide random ReLU layer keeps angles and its features are non-negative, so the cosines these claims read are
high for such a B although it has none of the paper's mechanism (low-rank weight-decay weights, reciprocal
orthogonality). A claim registered with ``reference_partner="untrained"`` therefore reads the study's untrained
partner pairs (``analysis.null_partners``, kind untrained, at the widest width; ``nulls.split_partners`` indexes
them by the real seeds) and its headline is its statistic on the real pairs minus the same statistic on those
pairs, paired by seed (the jackknife drops seed s from both), above 0: real partners take part where random features
do not. Why this reference and what each null partner gives: docs/claims.md ("Random-feature reference").
"""
from __future__ import annotations

import numpy as np

from lmcflow.claims.core import need, pivot
from lmcflow.claims.stats import Estimate, Sample, estimate
from lmcflow.config import ConfigError, same_value
from lmcflow.config.partners import REAL, partner_kinds

REFERENCE_KIND = "untrained"
REFERENCE_CONTROL = "random-feature partners (untrained B of the same width, same run)"


def widest_samples(tables: dict, reference: dict, rows, columns: list, cells: list, widest: float,
                   seeds) -> tuple[Sample, Sample]:
    """(real, reference): pair samples of ``columns`` by ``cells`` at the widest width of the real rows and of the
    reference partner's, built alike (the same pivot of the same selection: identical rows give identical values to
    the last bit) and indexed by the real ``seeds``. ``rows(tables)``: the claim's own selection (method, arm,
    layers, λ); raises NoData naming the config key where the study has no such reference rows."""
    def at_widest(t):
        df = rows(t) if t.get("layer_metrics") is not None else None
        return df[np.isclose(df.width.to_numpy(dtype=float), widest)] if df is not None else None

    ref = at_widest(reference)
    need(ref is not None and len(ref) > 0,
         f"no pairs with an untrained partner B at the widest width {widest:g}: the headline is measured against the "
         f"same statistic on the run's random-feature partners; add kind untrained there to the study's "
         f"analysis.null_partners (kinds: [untrained], at: {{model.width: [{widest:g}]}})")
    return pivot(at_widest(tables), columns, cells, seeds=seeds)[0], pivot(ref, columns, cells, seeds=seeds)[0]


def over_reference(statistic, real: Sample, reference: Sample) -> Estimate:
    """statistic(real means) − statistic(reference means) with its delete-one-seed jackknife interval (the two
    samples share their seeds: ``reference_sample``)."""
    return estimate(lambda m, r: statistic(m) - statistic(r), real, reference)


def share_over_reference(statistic, real: Sample, reference: Sample) -> Estimate:
    """(statistic(real means) − s_ref) / (1 − s_ref), s_ref = statistic(reference means), with its delete-one-seed
    jackknife interval as ``over_reference``: the share of what random features leave to a perfect 1 that the real
    partner closes. A difference alone (> 0) is met by any partner part-way from random features, such as a short run
    on shuffled labels, which learns the data's leading directions and nothing of the task; over half of the gap it is
    not (docs/claims.md)."""
    def share(m, r):
        s_ref = statistic(r)
        return (statistic(m) - s_ref) / (1 - s_ref)
    return estimate(share, real, reference)


def requires_reference_partner(cid, p, study, points) -> None:
    """Every point of the claim's weight-decay arm at its widest width trains untrained partners (the reference)."""
    arm = [q for q in points if q.partner == REAL and same_value(q.train["weight_decay"], p["weight_decay"])]
    if not arm:
        return  # requires_mechanism names the missing arm
    widest = max(float(q.model["width"]) for q in arm)
    missing = [q.point for q in arm if same_value(float(q.model["width"]), widest)
               and REFERENCE_KIND not in partner_kinds(q)]
    if missing:
        raise ConfigError(f"claims.{cid}: its headline is measured against pairs with an untrained (random-feature) "
                          f"partner B at the widest width {widest:g}, which points {missing} of study {study!r} do "
                          f"not train: add untrained to studies.{study}.analysis.null_partners.kinds and that width "
                          f"to its at (e.g. at: {{model.width: [{widest:g}]}})")
