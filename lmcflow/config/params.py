"""What a point's blocks say for one stage: analysis, alignment and mechanism settings, the merge methods that run
at the point, and which points may train in one bundle (``bundle_key``)."""
from __future__ import annotations

import json

from lmcflow.config.points import Point, lambda_grid, point_matches

ANALYSIS_FLAGS = ("identifiability", "swap_costs", "coherence")
# Weight layers (symmetry layer indices) per architecture, where a per-layer list can be checked early.
_N_WEIGHT_LAYERS = {"mlp": lambda m: int(m.get("depth", 3)) + 1, "sum_relu": lambda m: 1}


def analysis_params(point: Point) -> dict:
    """A point's ``analysis`` block (defaults from the schema)."""
    return point.analysis


ALIGNABLE_ARCHS = ("mlp", "vgg11", "resnet20")


def alignment_params(point: Point) -> dict:
    """``merge.alignment``: where the non-identity merge methods run and how."""
    return point.merge["alignment"]


def merge_methods(point: Point) -> list[str]:
    """Merge methods evaluated at a point: ``identity`` everywhere, the others only where
    ``merge.alignment.at`` matches (an empty ``at`` matches every point)."""
    methods = list(point.merge["methods"])
    if point_matches(point, alignment_params(point)["at"]):
        return methods
    return [m for m in methods if m == "identity"]


def repairs(point: Point) -> bool:
    """Whether the point's paths and N-way merges are evaluated with REPAIR too (``merge.repair``: enabled, and
    ``at`` matches; a point built by hand without the key: no)."""
    rep = point.merge.get("repair") or {}
    return bool(rep.get("enabled")) and point_matches(point, rep.get("at") or {})


def repairs_method(point: Point, method: str) -> bool:
    """Whether the point's paths (and N-way merges) of ``method`` are REPAIR'd: ``repairs`` and the method among
    ``merge.repair.methods`` (null or absent: every method)."""
    chosen = (point.merge.get("repair") or {}).get("methods")
    return repairs(point) and (chosen is None or method in chosen)


def many_sizes(point: Point) -> list[int]:
    """N values of the point's N-way merges (``merge.many``): its sizes where ``merge.many.at`` matches a trained
    point, else none; sizes above the point's seed count are dropped."""
    many = point.merge.get("many") or {}
    if point.train["epochs"] <= 0 or not point_matches(point, many.get("at") or {}):
        return []
    return [int(n) for n in many.get("sizes") or [] if int(n) <= len(point.seeds)]


def mechanism_params(point: Point) -> dict:
    """``analysis.mechanism``: LEWC / weak additivity / reciprocal orthogonality / low rank per seed pair."""
    return point.analysis["mechanism"]


def mechanism_lambdas(point: Point) -> list[float]:
    """λ values (paper convention: weight on θ_A) of the mechanism metrics: analysis.mechanism.lambdas,
    or the merge λ grid (merge.lambdas evenly spaced values; symmetric, so the same points as the path)."""
    lams = mechanism_params(point)["lambdas"]
    if lams:
        return [float(v) for v in lams]
    return lambda_grid(int(point.merge["lambdas"]))


def mechanism_methods(point: Point) -> list[str]:
    """Methods whose (aligned) seed pairs get mechanism metrics at this point (none: mechanism off)."""
    available = merge_methods(point)
    return [m for m in mechanism_params(point)["methods"] if m in available]


# ``train`` keys that do not change what a model learns: members of a bundle may differ in them, and
# the digest of a resumable training state ignores them.
EXECUTION_KEYS = ("resources", "checkpoint_every", "bundle", "bundle_grid", "compile")
# ``model.symmetry`` keys that change the values of buffers (masks, offsets, gate matrices), never a shape.
BUFFER_SYMMETRY_KEYS = ("sigma_f", "sigma_f_scale", "mask_seed", "n_fixed", "mask_type", "mask_density",
                        "fixed_scaling", "gate_scale")
_SYMMETRY_STRUCTURE = {"standard": "plain", "sigma_asymmetric": "gated", "w_asymmetric": "masked", "syre": "masked"}


def learning_settings(train: dict) -> dict:
    """A point's ``train`` block without execution-only keys: what the members of a bundle must share."""
    return {k: v for k, v in (train or {}).items() if k not in EXECUTION_KEYS}


def data_shape_key(dataset: str, data_cfg: dict | None = None) -> list:
    """What fixes the shape of a dataset's tensors, from the config alone (no data is read).

    Synthetic datasets of one generator with the same shape parameters (gaussian_subspace: classes, d,
    n_train; coherence: d, n_train; a parameter left out counts as "default") share a key, so e.g. the
    intrinsic-dimension sweep over k can be bundled; a subset is (base, n_train); any other dataset
    only matches itself. The training job still checks the actual tensors.
    """
    cfg = data_cfg or {}
    syn = (cfg.get("synthetic") or {}).get(dataset)
    if syn is not None:
        gen = syn.get("generator")
        keys = ("classes", "d", "n_train") if gen == "gaussian_subspace" else ("d", "n_train")
        return ["synthetic", gen] + [syn.get(k, "default") for k in keys]
    sub = (cfg.get("subsets") or {}).get(dataset)
    if sub is not None:
        return ["subset", sub.get("base"), sub.get("n_train")]
    return ["dataset", dataset]


def bundle_key(point: Point, data_cfg: dict | None = None) -> str:
    """Points with equal keys can train in one bundle (``lmcflow.bundle_training``): same model structure (the
    model block, with ``symmetry`` reduced to the layer kinds it builds: σ_F, masks and seeds only change
    buffers), same learning settings and training data of the same shape. A readable JSON string."""
    model = {k: v for k, v in point.model.items() if k != "symmetry"}
    kind = (point.model.get("symmetry") or {}).get("kind", "standard")
    return json.dumps({"model": model, "layers": _SYMMETRY_STRUCTURE.get(kind, kind),
                       "train": learning_settings(point.train), "data": data_shape_key(point.dataset, data_cfg)},
                      sort_keys=True, default=str)
