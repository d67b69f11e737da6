"""Study configuration: expansion of studies into points, and semantic checks.

A *study* is a base setting (dataset, model, train, merge blocks) plus a
``sweep``: a grid over dotted keys such as ``model.width`` or
``train.weight_decay``. Every grid cell is a *point*; every point is trained
once per seed and every pair of seeds is merged. Point ids are readable and
stable (``width-0.25__weight_decay-0.0001``), so paths and table rows say
what they are.
"""
from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field

POINT_BLOCKS = ("model", "train", "merge", "analysis")


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
    model: dict
    train: dict
    merge: dict
    analysis: dict = field(default_factory=dict)
    swept: dict = field(default_factory=dict)  # sweep key -> value for this point

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return list(itertools.combinations(sorted(self.seeds), 2))

    def to_dict(self) -> dict:
        return copy.deepcopy(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict) -> "Point":
        return cls(**copy.deepcopy(d))


def expand_study(name: str, study: dict, defaults: dict) -> list[Point]:
    """All points of one study, in grid order."""
    base = deep_merge(defaults, {k: study.get(k, {}) for k in POINT_BLOCKS})
    sweep = study.get("sweep") or {}
    keys = list(sweep)
    for k in keys:
        if not isinstance(sweep[k], list) or not sweep[k]:
            raise ConfigError(f"studies.{name}.sweep.{k}: expected a non-empty list of values")
        if k.split(".")[0] not in POINT_BLOCKS and k != "dataset":
            raise ConfigError(f"studies.{name}.sweep.{k}: sweep keys start with one of "
                              f"{', '.join(POINT_BLOCKS)} or are 'dataset'")
    points = []
    seen = set()
    for values in itertools.product(*(sweep[k] for k in keys)):
        cfg = copy.deepcopy(base)
        dataset = study["dataset"]
        for k, v in zip(keys, values):
            if k == "dataset":
                dataset = v
            else:
                _set_dotted(cfg, k, v, f"studies.{name}")
        pid = "__".join(f"{k.split('.')[-1]}-{format_value(v)}" for k, v in zip(keys, values)) or "base"
        if pid in seen:
            raise ConfigError(f"studies.{name}.sweep: two points share the id {pid!r}; "
                              f"sweep keys must have distinct last names")
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
        n = int(p.merge.get("lambdas", 11))
        if n < 3 or (n - 1) % 2:
            raise ConfigError(f"{where}: merge.lambdas={n} must be odd and ≥ 3 so the grid holds 0, ½ and 1")
        if p.model.get("arch") != "mlp" and p.model.get("norm") == "layernorm":
            raise ConfigError(f"{where}: model.norm=layernorm is only for the MLP; use batchnorm or groupnorm")
    for cid, ccfg in (config.get("claims") or {}).items():
        if cid not in claim_registry:
            raise ConfigError(f"claims.{cid}: unknown claim id; known: {', '.join(sorted(claim_registry))}")
        study = (ccfg or {}).get("study")
        if study not in studies:
            raise ConfigError(f"claims.{cid}.study: {study!r} is not a study in this config; "
                              f"defined: {', '.join(studies) or 'none'}")
        claim = claim_registry[cid]
        claim.check_config(cid, ccfg, studies[study], [p for (s, _), p in points.items() if s == study])


def study_points(points: dict, study: str) -> list[Point]:
    return [p for (s, _), p in points.items() if s == study]


get_dotted = _get_dotted
