"""Null partners: models B that have nothing to do with model A, trained in the same run as controls.

``analysis.null_partners: {kinds: [...], at: {...}}`` gives each matching trained point one partner point per
kind: the same model and settings, seeds ``PARTNER_SEED_OFFSET[kind] + b`` for every seed b of the point. Kind
``untrained``: ``train.epochs: 0`` (the seeded initialisation); ``shuffled_labels``: the same bundled training on
the training labels permuted by a permutation drawn from the partner's own seed (``Dataset.with_shuffled_labels``);
``collapsed``: B itself scaled toward zero, the model real seed b gives (its initialisation and data order, the
same training), every parameter multiplied by ``collapse_scale`` (``training_seed``, ``collapse``; the offset F of a
W-asymmetric or SyRe layer too, its mask not: W_eff × s): the
merge θ_A/2 + s·θ_B/2 is "A plus almost nothing", what a shuffled-label partner that weight decay collapsed gives.
The partner point's pairs are (real a, partner of b): the pairs of the real point with B replaced, so a claim
compares them pair by pair and the seed-level jackknife drops seed s from both.
"""
from __future__ import annotations

import copy

from lmcflow.config.points import Point, expand_study, point_matches
from lmcflow.errors import ConfigError

PARTNER_KINDS = ("untrained", "shuffled_labels", "collapsed")
REAL = "real"
# partner seed = offset + the real seed b it stands in for (real seeds must stay below the smallest offset)
PARTNER_SEED_OFFSET = {"untrained": 1000, "shuffled_labels": 2000, "collapsed": 3000}
PARTNER_SEP = "__partner-"


def null_partner_params(point: Point) -> dict:
    """``analysis.null_partners`` of a point (schema defaults filled in)."""
    return point.analysis["null_partners"]


def partner_kinds(point: Point) -> list[str]:
    """The null-partner kinds a real point trains (none where ``at`` does not match or the point is untrained)."""
    np_ = null_partner_params(point)
    # epochs compared as given: the schema's check of a swept value ("train.epochs: 'ten' …") runs after this
    if point.partner != REAL or not np_["kinds"] or point.train["epochs"] == 0:
        return []
    return list(np_["kinds"]) if point_matches(point, np_["at"]) else []


def real_seed(kind: str, seed: int) -> int:
    """The real seed b a partner seed stands in for (a real seed is itself)."""
    return int(seed) - PARTNER_SEED_OFFSET[kind] if kind != REAL else int(seed)


def partner_seed(kind: str, seed: int) -> int:
    """The seed of the ``kind`` partner of real seed b: offset + b."""
    return PARTNER_SEED_OFFSET[kind] + int(seed)


def training_seed(point: Point, seed: int) -> int:
    """The seed a model of ``point`` is initialised and trained from: its own, but a collapsed partner's is the real
    seed b it scales (it is B, trained as B is, then scaled)."""
    return real_seed(point.partner, seed) if point.partner == "collapsed" else int(seed)


# buffers that are a symmetry-breaking layer's structure, not a magnitude: the 0/1 mask D of W_eff = D⊙W + F and
# the gate matrix C inside sigmoid(Cx)⊙x (lmcflow.symmetry); a collapse keeps them
STRUCTURE_BUFFERS = ("mask", "C")


def collapse(model, point: Point) -> None:
    """A collapsed partner: every parameter and buffer of the trained ``model`` times ``collapse_scale`` (in place;
    other kinds unchanged), the fixed offset F included, so W_eff = D⊙W + F becomes s·W_eff; the structure buffers
    (``STRUCTURE_BUFFERS``: the 0/1 mask, the gate matrix) stay, since scaling D would scale W by s² and leave a
    fractional mask on the merge path. Reason for F: docs/claims.md, "Null partners"."""
    if point.partner != "collapsed":
        return
    import torch  # here, not at the top: lmcflow.config is read at DAG construction, where torch costs seconds

    scale = float(null_partner_params(point)["collapse_scale"])
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if t.is_floating_point() and name.rsplit(".", 1)[-1] not in STRUCTURE_BUFFERS:
                t.mul_(scale)


def real_seeds(point: Point) -> list[int]:
    """The seeds of the real models of a point (a partner point: of its real point)."""
    return sorted(real_seed(point.partner, s) for s in point.seeds)


def partner_point(real: Point, kind: str) -> Point:
    """The partner point of kind ``kind`` of a real point."""
    if kind not in PARTNER_KINDS:
        raise ConfigError(f"studies.{real.study}.analysis.null_partners.kinds: unknown kind {kind!r}; "
                          f"allowed: {', '.join(PARTNER_KINDS)}")
    seeds = sorted(int(s) for s in real.seeds)
    if seeds and max(seeds) >= min(PARTNER_SEED_OFFSET.values()):
        raise ConfigError(f"studies.{real.study}.seeds: with analysis.null_partners the real seeds must be below "
                          f"{min(PARTNER_SEED_OFFSET.values())} (partner seeds are offset + b), got {max(seeds)}")
    train = dict(copy.deepcopy(real.train))
    if kind == "untrained":
        train["epochs"] = 0
    analysis = copy.deepcopy(real.analysis)
    # a partner point runs its real point's analyses on its own models and pairs (rows marked by ``partner``)
    analysis["null_partners"] = {"kinds": [], "at": {},
                                 "collapse_scale": real.analysis["null_partners"].get("collapse_scale", 0.1)}
    return Point(study=real.study, point=f"{real.point}{PARTNER_SEP}{kind}", dataset=real.dataset,
                 seeds=[partner_seed(kind, b) for b in seeds], model=copy.deepcopy(real.model), train=train,
                 merge=copy.deepcopy(real.merge), analysis=analysis, swept=dict(real.swept), partner=kind)


def partner_points(points: list[Point]) -> list[Point]:
    """The partner points of a study's real points, in study order."""
    return [partner_point(p, k) for p in points for k in partner_kinds(p)]


def real_point_id(point: Point) -> str:
    """The id of the real point whose pairs a partner point's pairs stand in for."""
    return point.point.split(PARTNER_SEP)[0] if point.partner != REAL else point.point


def expand_points(config: dict) -> dict[tuple[str, str], Point]:
    """(study, point id) -> Point for every study in the config: its points, then their null partners."""
    out = {}
    for name, study in (config.get("studies") or {}).items():
        real = expand_study(name, study, config.get("defaults") or {})
        for p in real + partner_points(real):
            out[(name, p.point)] = p
    return out
