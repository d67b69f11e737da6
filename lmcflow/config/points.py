"""Studies expanded into points: a study's sweep grids over dotted keys, one ``Point`` per grid cell with readable,
stable ids (``width-0.25__weight_decay-0.0001``) and every block's defaults filled in; a point's values by dotted
key."""
from __future__ import annotations

import copy
import itertools
import math
import numbers
from dataclasses import dataclass, field

from lmcflow.config.loading import POINT_BLOCKS, deep_merge
from lmcflow.config.schema import fill_defaults, load_schema
from lmcflow.errors import ConfigError


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
    partner: str = "real"  # "real", or the kind of null partner models B this point trains (config.partners)

    def __post_init__(self) -> None:
        root = load_schema()
        for block in POINT_BLOCKS:
            setattr(self, block, fill_defaults(copy.deepcopy(getattr(self, block) or {}), root["$defs"][block], root))

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return seed_pairs(self.seeds, self.merge.get("pairs", "all"))

    def to_dict(self) -> dict:
        return copy.deepcopy(self.__dict__)

    def job_dict(self, *blocks: str) -> dict:
        """What a job needs of the point, and nothing else: identity, dataset and the named blocks without
        their ``resources`` (which never change an output). Rules pass it as ``params``, so a setting a job
        does not read never reruns it (adding an ``analysis`` block retrains nothing)."""
        out = {"study": self.study, "point": self.point, "dataset": self.dataset}
        if self.partner != "real":  # a real point's params stay what they were before null partners existed
            out["partner"] = self.partner
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


def study_points(points: dict, study: str) -> list[Point]:
    return [p for (s, _), p in points.items() if s == study]


get_dotted = _get_dotted


def seed_pairs(seeds, mode: str = "all") -> list[tuple[int, int]]:
    """The seed pairs a point merges (``merge.pairs``): every pair a < b, or (``disjoint``) the sorted seeds paired
    in turn, (s0, s1), (s2, s3), … (an odd last seed is left out)."""
    s = sorted(int(x) for x in seeds)
    if mode == "disjoint":
        return list(zip(s[0::2], s[1::2]))
    return list(itertools.combinations(s, 2))


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

    num = lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)  # noqa: E731
    if num(a) and num(b):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return a == b


def point_matches(point: Point, where: dict | None) -> bool:
    """True if for every dotted key in ``where`` the point's value is one of the listed values."""
    return all(any(same_value(point_value(point, k), v) for v in vals) for k, vals in (where or {}).items())
