"""Study configuration: loading, defaults, expansion of studies into points, and semantic checks.

Defaults live in one place, the JSON schema ``workflow/schemas/config.schema.yaml`` (``default:``
of each key): ``resolve_config`` fills them into a loaded config and every ``Point`` fills them into
its blocks, so code reads ``point.merge["lambdas"]`` and never carries a fallback of its own.

Which config a run uses (``resolve_config``): the embedded ``config/config.yaml``, or the
``--configfile`` file(s) instead. A config file replaces the embedded ``studies`` and ``claims``
(it runs only its own studies) and falls back to the embedded file for the other top-level keys
(paths, device, threads, data); ``--config key=value`` overrides go on top of either. A config
without studies is refused.

A *study* is a base setting (dataset, model, train, merge blocks) plus a
``sweep``: a grid over dotted keys such as ``model.width`` or
``train.weight_decay`` (or a list of such grids over the same keys, whose
points are united: a sweep need not be a full product). Every grid cell is a
*point*; every point is trained
once per seed and every pair of seeds is merged. Point ids are readable and
stable (``width-0.25__weight_decay-0.0001``), so paths and table rows say
what they are.
"""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from pathlib import Path

from lmcflow.catalog import TORCHVISION_DATASETS, check_params, check_symmetry
from lmcflow.schema import fill_defaults, load_schema

POINT_BLOCKS = ("model", "train", "merge", "analysis")
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "config/config.yaml"
# Top-level keys a config file brings itself; everything else falls back to the embedded default.
STUDY_KEYS = ("studies", "claims")


class ConfigError(ValueError):
    """A config value is wrong; the message names the key and what is allowed."""


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


# --------------------------------------------------------------------------- validation and resolution
def validate_config(cfg: dict, source: str = "config") -> dict:
    """Schema check (the message names the key) and defaults filled in; returns ``cfg``."""
    import jsonschema

    if not isinstance(cfg, dict) or not cfg.get("studies"):
        raise ConfigError(
            f"{source}: a config must name at least one study under `studies:` (and, optionally, `claims:` about "
            f"them); config/config.yaml shows the form and config/README.md documents every key. A config file "
            f"replaces the default's studies and claims; paths, device, threads and data fall back to the default's")
    try:
        jsonschema.validate(cfg, load_schema())
    except jsonschema.ValidationError as err:
        key = err.json_path.removeprefix("$").removeprefix(".") or "(top level)"
        raise ConfigError(f"{source}: {key}: {err.message}") from None
    return fill_defaults(cfg, load_schema())


def resolve_config(configfiles=(), overrides: dict | None = None, default_path=DEFAULT_CONFIG) -> dict:
    """The config of a run: the embedded default, or the given config files (merged in order) on top of the
    default's settings without its studies and claims; ``overrides`` (``--config key=value``) last."""
    import yaml

    def load(path) -> dict:
        data = yaml.safe_load(Path(path).read_text())
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
        return data

    default = load(default_path)
    if configfiles:
        user: dict = {}
        for f in configfiles:
            user = deep_merge(user, load(f))
        source = ", ".join(str(f) for f in configfiles)
        if not user.get("studies"):
            validate_config(user, source)  # raises: what a config must hold
        cfg = deep_merge({k: v for k, v in default.items() if k not in STUDY_KEYS}, user)
    else:
        cfg, source = default, str(default_path)
    if overrides:
        cfg = deep_merge(cfg, dict(overrides))
        source += " with --config overrides"
    return validate_config(cfg, source)


def format_value(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _set_dotted(d: dict, key: str, value, where: str) -> None:
    parts = key.split(".")
    cur = d
    for p in parts[:-1]:
        if not isinstance(cur.get(p), dict):
            raise ConfigError(f"{where}: sweep key {key!r} does not name a setting (no block {p!r})")
        cur = cur[p]
    if parts[-1] not in cur:
        raise ConfigError(f"{where}: sweep key {key!r} does not name a known setting")
    cur[parts[-1]] = copy.deepcopy(value)


def _get_dotted(d: dict, key: str, default=None):
    cur = d
    for p in key.split("."):
        if not isinstance(cur, dict) or p not in cur:
            return default
        cur = cur[p]
    return cur


@dataclass
class Point:
    study: str
    point: str
    dataset: str
    seeds: list
    model: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    merge: dict = field(default_factory=dict)
    analysis: dict = field(default_factory=dict)
    swept: dict = field(default_factory=dict)  # sweep key -> value for this point

    def __post_init__(self) -> None:
        root = load_schema()
        for block in POINT_BLOCKS:
            setattr(self, block, fill_defaults(copy.deepcopy(getattr(self, block) or {}), root["$defs"][block], root))

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return list(itertools.combinations(sorted(self.seeds), 2))

    def to_dict(self) -> dict:
        return copy.deepcopy(self.__dict__)

    def job_dict(self, *blocks: str) -> dict:
        """What a job needs of the point, and nothing else: identity, dataset and the named blocks without
        their ``resources`` (which never change an output). Rules pass it as ``params``, so a setting a job
        does not read never reruns it (adding an ``analysis`` block retrains nothing)."""
        out = {"study": self.study, "point": self.point, "dataset": self.dataset}
        for block in blocks:
            out[block] = canonical({k: v for k, v in getattr(self, block).items() if k != "resources"})
        return out

    @classmethod
    def from_dict(cls, d: dict) -> Point:
        """A point from ``to_dict`` or ``job_dict`` output (blocks a job dict leaves out take schema defaults)."""
        d = copy.deepcopy(d)
        d.setdefault("seeds", [])
        return cls(**d)


def canonical(value):
    """``value`` with every mapping's keys sorted (lists keep their order). Job params are built from it: Snakemake
    compares params by their text, so the key order of a config file must not rerun a job."""
    if isinstance(value, dict):
        return {k: canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    return copy.deepcopy(value)


def _as_grids(study: dict) -> list:
    """``sweep`` as written, as a list of grids: one mapping becomes a list of one."""
    sweep = study.get("sweep") or {}
    return sweep if isinstance(sweep, list) else [sweep]


def sweep_grids(name: str, study: dict) -> list[dict]:
    """A study's sweep as a list of grids ``{dotted key: [values]}``, all over the same keys.

    ``sweep`` is one grid (a mapping) or a list of grids whose points are united, e.g. one
    weight-decay arm at every width and another at two widths only.
    """
    sweep = study.get("sweep") or {}
    grids = _as_grids(study)
    if not grids:
        raise ConfigError(f"studies.{name}.sweep: expected a mapping or a non-empty list of mappings")
    keys = None
    for i, grid in enumerate(grids):
        where = f"studies.{name}.sweep" + (f"[{i}]" if isinstance(sweep, list) else "")
        if not isinstance(grid, dict) or (isinstance(sweep, list) and not grid):
            raise ConfigError(f"{where}: expected a mapping {{dotted.key: [values...]}}")
        for k, v in grid.items():
            if not isinstance(v, list) or not v:
                raise ConfigError(f"{where}.{k}: expected a non-empty list of values")
            if k.split(".")[0] not in POINT_BLOCKS and k != "dataset":
                raise ConfigError(f"{where}.{k}: sweep keys start with one of "
                                  f"{', '.join(POINT_BLOCKS)} or are 'dataset'")
        if keys is not None and list(grid) != keys:
            raise ConfigError(f"{where}: every grid of a sweep list must have the same keys in the same "
                              f"order (point ids and table columns depend on them); expected {keys}, "
                              f"got {list(grid)}")
        keys = list(grid)
    return grids


def swept_values(study: dict, key: str) -> list:
    """Distinct values a study sweeps ``key`` over (across all its grids), in first-seen order."""
    out = []
    for grid in _as_grids(study):
        for v in (grid.get(key) or []) if isinstance(grid, dict) else []:
            if v not in out:
                out.append(v)
    return out


def expand_study(name: str, study: dict, defaults: dict) -> list[Point]:
    """All points of one study, in grid order (grid by grid for a list of grids)."""
    root = load_schema()
    # schema defaults < the config's ``defaults:`` block < the study's own blocks < the sweep
    base = {k: fill_defaults(deep_merge((defaults or {}).get(k) or {}, study.get(k) or {}), root["$defs"][k], root)
            for k in POINT_BLOCKS}
    grids = sweep_grids(name, study)
    keys = list(grids[0])
    cells = [values for grid in grids for values in itertools.product(*(grid[k] for k in keys))]
    points = []
    seen = set()
    for values in cells:
        cfg = copy.deepcopy(base)
        dataset = study["dataset"]
        for k, v in zip(keys, values):
            if k == "dataset":
                dataset = v
            else:
                _set_dotted(cfg, k, v, f"studies.{name}")
        pid = "__".join(f"{k.split('.')[-1]}-{format_value(v)}" for k, v in zip(keys, values)) or "base"
        if pid in seen:
            raise ConfigError(f"studies.{name}.sweep: two points share the id {pid!r}; sweep keys must "
                              f"have distinct last names, and the grids of a sweep list must not overlap")
        seen.add(pid)
        points.append(Point(study=name, point=pid, dataset=dataset, seeds=list(study["seeds"]),
                            swept=dict(zip(keys, values)), **{k: cfg.get(k, {}) for k in POINT_BLOCKS}))
    return points


def expand_points(config: dict) -> dict[tuple[str, str], Point]:
    """(study, point id) -> Point for every study in the config."""
    out = {}
    for name, study in (config.get("studies") or {}).items():
        for p in expand_study(name, study, config.get("defaults") or {}):
            out[(name, p.point)] = p
    return out


def check_semantics(config: dict, claim_registry: dict, dataset_names, architectures) -> None:
    """Checks beyond the JSON schema, run at DAG construction before any job."""
    studies = config.get("studies") or {}
    for name, study in studies.items():
        seeds = study.get("seeds", [])
        if len(set(seeds)) != len(seeds):
            raise ConfigError(f"studies.{name}.seeds: seeds must be distinct, got {seeds}")
    points = expand_points(config)
    for (name, pid), p in points.items():
        where = f"studies.{name} (point {pid})"
        if p.dataset not in dataset_names:
            raise ConfigError(f"{where}: dataset {p.dataset!r} is not defined; allowed: {', '.join(dataset_names)}")
        if p.model.get("arch") not in architectures:
            raise ConfigError(f"{where}: model.arch {p.model.get('arch')!r} is unknown; "
                              f"allowed: {', '.join(architectures)}")
        if not p.model.get("width", 0) > 0:
            raise ConfigError(f"{where}: model.width must be > 0, got {p.model.get('width')}")
        n = int(p.merge["lambdas"])
        if n < 3 or (n - 1) % 2:
            raise ConfigError(f"{where}: merge.lambdas={n} must be odd and ≥ 3 so the grid holds 0, ½ and 1")
        if p.model.get("arch") != "mlp" and p.model.get("norm") == "layernorm":
            raise ConfigError(f"{where}: model.norm=layernorm is only for the MLP; use batchnorm or groupnorm")
    check_identifiability_semantics(config, points)
    check_alignment_semantics(points)
    for cid, ccfg in (config.get("claims") or {}).items():
        if cid not in claim_registry:
            raise ConfigError(f"claims.{cid}: unknown claim id; known: {', '.join(sorted(claim_registry))}")
        claim = claim_registry[cid]
        named = (ccfg or {}).get("study")
        names = list(named) if isinstance(named, list) else [named]
        if len(names) > 1 and not claim.multi_study:
            raise ConfigError(f"claims.{cid}.study: this claim reads one study, got the list {names}")
        if not names:
            raise ConfigError(f"claims.{cid}.study: the list of studies is empty")
        for study in names:
            if study not in studies:
                raise ConfigError(f"claims.{cid}.study: {study!r} is not a study in this config; "
                                  f"defined: {', '.join(studies) or 'none'}")
            claim.check_config(cid, ccfg, study, studies[study], [p for (s, _), p in points.items() if s == study])


# --------------------------------------------------------------------------- identifiability
ANALYSIS_FLAGS = ("identifiability", "swap_costs", "coherence")
# Weight layers (symmetry layer indices) per architecture, where a per-layer list can be checked early.
_N_WEIGHT_LAYERS = {"mlp": lambda m: int(m.get("depth", 3)) + 1, "sum_relu": lambda m: 1}


def analysis_params(point: Point) -> dict:
    """A point's ``analysis`` block (defaults from the schema)."""
    return point.analysis


def check_identifiability_semantics(config: dict, points: dict) -> None:
    """Synthetic dataset parameters, dataset subsets, symmetry blocks and analysis flags."""

    data = config.get("data") or {}
    synthetic = data.get("synthetic") or {}
    for name, params in synthetic.items():
        try:
            check_params(name, params)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    for name, sub in (data.get("subsets") or {}).items():
        if name in TORCHVISION_DATASETS or name in synthetic:
            raise ConfigError(f"data.subsets.{name}: the name is already a torchvision or synthetic dataset; "
                              f"choose another name")
        if (sub or {}).get("base") not in TORCHVISION_DATASETS:
            raise ConfigError(f"data.subsets.{name}.base: {(sub or {}).get('base')!r} is not a torchvision "
                              f"dataset; allowed: {', '.join(sorted(TORCHVISION_DATASETS))}")
    for (name, pid), p in points.items():
        where = f"studies.{name} (point {pid})"
        try:
            sym = check_symmetry(p.model.get("symmetry"))
        except ValueError as err:
            raise ConfigError(f"{where}: {err}") from None
        n_layers = _N_WEIGHT_LAYERS.get(p.model.get("arch"))
        if n_layers and sym["kind"] in ("w_asymmetric", "syre"):
            need = n_layers(p.model)
            for key in ("n_fixed", "sigma_f_scale"):
                v = sym[key]
                if isinstance(v, (list, tuple)) and len(v) < need:
                    raise ConfigError(f"{where}: model.symmetry.{key} has {len(v)} entries but "
                                      f"model.arch={p.model['arch']} has {need} weight layers (head included); "
                                      f"give one entry per layer or a single number")
        a = analysis_params(p)
        other = [f for f in a["matching_features"] if f != "post_activation"]
        if a["identifiability"] and other and p.model.get("arch") != "mlp":
            raise ConfigError(f"{where}: analysis.matching_features {other} need model.arch mlp (other architectures "
                              f"give post-activation features only); got {p.model.get('arch')!r}")
        if a["swap_costs"] and a["ridge_beta"] is not None and a["ridge_steps"] > 0 and \
                p.model.get("arch") not in ("mlp", "sum_relu"):
            raise ConfigError(f"{where}: analysis.ridge_steps > 0 (the post-activation ridge fit) is for linear layers "
                              f"(model.arch mlp or sum_relu); use ridge_steps: 0 for {p.model.get('arch')!r}")
        if (a["identifiability"] or a["coherence"]) and len(p.seeds) < 2:
            raise ConfigError(f"{where}: analysis.identifiability / analysis.coherence compare seed pairs; "
                              f"studies.{name}.seeds needs at least 2 seeds")
        if p.model.get("arch") == "sum_relu" and not (p.dataset in synthetic and
                                                      synthetic[p.dataset].get("generator") == "coherence"):
            raise ConfigError(f"{where}: model.arch=sum_relu has a scalar output and needs a regression "
                              f"dataset (a data.synthetic entry with generator: coherence), got {p.dataset!r}")


def study_points(points: dict, study: str) -> list[Point]:
    return [p for (s, _), p in points.items() if s == study]


get_dotted = _get_dotted


# --------------------------------------------------------------------------- alignment and mechanism
ALIGNABLE_ARCHS = ("mlp", "vgg11", "resnet20")


def lambda_grid(n: int) -> list[float]:
    """``n`` evenly spaced λ in [0, 1] (odd ``n``: the grid holds 0, ½ and 1)."""
    return [round(i / (n - 1), 10) for i in range(n)]


def point_value(point: Point, key: str):
    """The value of a dotted key (``model.width``, ``train.weight_decay``, ``dataset``) at a point."""
    if key == "dataset":
        return point.dataset
    block, _, rest = key.partition(".")
    return _get_dotted(getattr(point, block, None) or {}, rest) if rest else None


def same_value(a, b) -> bool:
    """Config values equal; numbers compare with a relative tolerance (3e-3 == 0.003 == 3.0e-3)."""
    import math
    import numbers

    num = lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)  # noqa: E731
    if num(a) and num(b):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return a == b


def point_matches(point: Point, where: dict | None) -> bool:
    """True if for every dotted key in ``where`` the point's value is one of the listed values."""
    return all(any(same_value(point_value(point, k), v) for v in vals) for k, vals in (where or {}).items())


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


def check_alignment_semantics(points: dict) -> None:
    """merge.alignment.at names settings and matches a point; aligned/mechanism models can be aligned."""
    by_study: dict[str, list] = {}
    for (name, pid), p in points.items():
        by_study.setdefault(name, []).append(p)
        where = f"studies.{name} (point {pid})"
        for key in alignment_params(p)["at"] or {}:
            if point_value(p, key) is None:
                raise ConfigError(f"{where}: merge.alignment.at.{key}: {key!r} names no setting of the point")
        mech = mechanism_params(p)
        unknown = [m for m in mech["methods"] if m not in p.merge["methods"]]
        if unknown:
            raise ConfigError(f"{where}: analysis.mechanism.methods {unknown} are not in merge.methods "
                              f"{p.merge.get('methods')}; the mechanism reads the merge's aligned pairs")
        aligned = [m for m in merge_methods(p) if m != "identity"]
        if (aligned or mechanism_methods(p)) and p.model.get("arch") not in ALIGNABLE_ARCHS:
            what = "merge.methods " + str(aligned) if aligned else "analysis.mechanism"
            raise ConfigError(f"{where}: {what} needs model.arch in {', '.join(ALIGNABLE_ARCHS)}, "
                              f"got {p.model.get('arch')!r}")
    for name, pts in by_study.items():
        wanted = {m for p in pts for m in p.merge["methods"] if m != "identity"}
        if wanted and not any(point_matches(p, alignment_params(p)["at"]) for p in pts):
            raise ConfigError(f"studies.{name}: merge.alignment.at {alignment_params(pts[0])['at']} matches no "
                              f"point of the study, so merge.methods {sorted(wanted)} would never run")


# --------------------------------------------------------------------------- bundled training
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
    """Points with equal keys can train in one bundle (``lmcflow.stacking``): same model structure (the
    model block, with ``symmetry`` reduced to the layer kinds it builds: σ_F, masks and seeds only change
    buffers), same learning settings and training data of the same shape. A readable JSON string."""
    import json

    model = {k: v for k, v in point.model.items() if k != "symmetry"}
    kind = (point.model.get("symmetry") or {}).get("kind", "standard")
    return json.dumps({"model": model, "layers": _SYMMETRY_STRUCTURE.get(kind, kind),
                       "train": learning_settings(point.train), "data": data_shape_key(point.dataset, data_cfg)},
                      sort_keys=True, default=str)


def check_bundle_points(points: list, data_cfg: dict | None = None, label: str = "bundle") -> None:
    """ConfigError naming two points of ``points`` that cannot share a bundle, and how they differ."""
    import json

    if not points:
        return
    ref = json.loads(bundle_key(points[0], data_cfg))
    for p in points[1:]:
        key = json.loads(bundle_key(p, data_cfg))
        if key != ref:
            diff = []
            for block, want in ref.items():
                got = key[block]
                if isinstance(want, dict):
                    diff += [f"{block}.{k}" for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
                elif want != got:
                    diff.append(block)
            raise ConfigError(f"{label}: points {points[0].study}/{points[0].point} and {p.study}/{p.point} cannot "
                              f"train in one bundle: they differ in {', '.join(diff)} (a bundle needs the same model "
                              f"structure, train settings and data shape)")
