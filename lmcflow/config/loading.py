"""Which config a run uses (``resolve_config``): the embedded ``config/config.yaml``, or the ``--configfile``
file(s) instead, with ``--config key=value`` overrides on top; checked against the JSON schema, which fills in
every default."""
from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import yaml

from lmcflow.config.schema import fill_defaults, load_schema, schema_validator
from lmcflow.errors import ConfigError

POINT_BLOCKS = ("model", "train", "merge", "analysis")
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "config/config.yaml"
# Top-level keys a config file brings itself; everything else falls back to the embedded default.
STUDY_KEYS = ("studies", "claims")


def deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def validate_config(cfg: dict, source: str = "config") -> dict:
    """Schema check (the message names the key) and defaults filled in; returns ``cfg``."""
    import jsonschema  # ~60 ms of import: jobs that only rebuild Points from dicts never validate

    if not isinstance(cfg, dict) or not cfg.get("studies"):
        raise ConfigError(
            f"{source}: a config must name at least one study under `studies:` (and, optionally, `claims:` about "
            f"them); config/config.yaml shows the form and config/README.md documents every key. A config file "
            f"replaces the default's studies and claims; paths, device, threads and data fall back to the default's")
    err = jsonschema.exceptions.best_match(schema_validator().iter_errors(cfg))  # as jsonschema.validate picks
    if err is not None:
        key = err.json_path.removeprefix("$").removeprefix(".") or "(top level)"
        raise ConfigError(f"{source}: {key}: {err.message}")
    bad = next(non_finite(cfg), None)
    if bad is not None:  # JSON Schema's bounds let NaN through (every comparison with it is false), and ±inf
        raise ConfigError(f"{source}: {bad[0]}: {bad[1]!r} is not a finite number; every number in a config is")
    return fill_defaults(cfg, load_schema())


def non_finite(value, where: str = ""):
    """(dotted key, value) of every NaN or infinite number in a config (YAML's ``.nan``, ``.inf``)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield where or "(top level)", value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from non_finite(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from non_finite(v, f"{where}[{i}]")


def _typed(value):
    """A ``--config`` value with the scalars inside lists and mappings typed as YAML types them: Snakemake
    parses those with YAML's base loader, which leaves every scalar a string (``[5, 6]`` → ``['5', '6']``)."""
    if isinstance(value, list):
        return [_typed(v) if isinstance(v, (list, dict)) else _scalar(v) for v in value]
    if isinstance(value, dict):
        return {k: _typed(v) if isinstance(v, (list, dict)) else _scalar(v) for k, v in value.items()}
    return value


_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _scalar(v):
    """A scalar as the command line means it: numbers as Python reads them (YAML 1.1 reads ``1e-4`` as a
    string), anything else as YAML types it."""
    if not isinstance(v, str):
        return v
    if _NUMBER.fullmatch(v.strip()):
        return int(v) if re.fullmatch(r"[-+]?\d+", v.strip()) else float(v)
    try:
        return yaml.safe_load(v)
    except yaml.YAMLError:
        return v


def parse_overrides(entries) -> dict:
    """``--config`` entries as a nested mapping: ``KEY=VALUE``, where a dotted KEY names a nested key
    (``defaults.train.epochs=3`` is ``{"defaults": {"train": {"epochs": 3}}}``) and VALUE is a YAML value
    (``studies.width.seeds=[0,1,2]``); later entries win. Validated with the rest of the config."""
    out: dict = {}
    for entry in entries:
        key, sep, value = entry.partition("=")
        parts = key.split(".")
        if not sep or not all(re.fullmatch(r"[A-Za-z_][\w-]*", p) for p in parts):
            raise ConfigError(f"--config {entry}: expected KEY=VALUE with KEY a config key or a dotted path to "
                              f"one, e.g. --config defaults.train.epochs=3 (config/README.md lists every key)")
        nested = _typed(_scalar(value)) if value else None
        for part in reversed(parts):
            nested = {part: nested}
        out = deep_merge(out, nested)
    return out


def top_level_keys() -> list[str]:
    return list(load_schema()["properties"])


def load_config_file(path) -> dict:
    """One config file as a mapping, or a ConfigError naming the file (and line and column for bad YAML): a
    missing, empty or non-mapping file, invalid YAML, a top-level key that is no config key."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: no such config file" + (" (a folder)" if p.is_dir() else "")
                          + "; give a YAML config such as config/config.yaml, or none for the embedded default")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not a text (UTF-8) file ({err})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        what = " ".join(str(getattr(err, "problem", None) or err).split())
        raise ConfigError(f"{where}: not valid YAML: {what}") from None
    if data is None:
        raise ConfigError(f"{path}: empty config file; a config names at least one study under `studies:` "
                          f"(config/config.yaml shows the form, config/README.md documents every key)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys, got a YAML {type(data).__name__}")
    known = top_level_keys()
    unknown = [k for k in data if k not in known]
    if unknown:
        raise ConfigError(f"{path}: unknown top-level key {unknown[0]!r}; a config's keys are {', '.join(known)} "
                          f"(config/README.md documents each)")
    return data


def resolve_config(configfiles=(), overrides: dict | None = None, default_path=DEFAULT_CONFIG) -> dict:
    """The config of a run: the embedded default, or the given config files (merged in order) on top of the
    default's settings without its studies and claims; ``overrides`` (``--config key=value``) last."""

    default = load_config_file(default_path)
    if configfiles:
        user: dict = {}
        for f in configfiles:
            user = deep_merge(user, load_config_file(f))
        source = ", ".join(str(f) for f in configfiles)
        if not user.get("studies"):
            validate_config(user, source)  # raises: what a config must hold
        cfg = deep_merge({k: v for k, v in default.items() if k not in STUDY_KEYS}, user)
    else:
        cfg, source = default, str(default_path)
    if overrides:
        unknown = [k for k in overrides if k not in top_level_keys()]
        if unknown:
            raise ConfigError(f"--config {unknown[0]}=…: unknown top-level key {unknown[0]!r}; a config's keys are "
                              f"{', '.join(top_level_keys())} (config/README.md documents each)")
        cfg = deep_merge(cfg, {k: _typed(v) for k, v in dict(overrides).items()})
        source += " with --config overrides"
    return add_replicate_studies(validate_config(cfg, source))


# --------------------------------------------------------------------------- replicate studies
# Every study a claim reads, trained again on the disjoint seeds ``replicate_seeds``, so that each verdict is
# decided a second time on models that share nothing with the first (not a model, not a pair): the study with
# only its ``seeds`` replaced, named ``<study>-replicate``, run through the same jobs and tables as any study.
REPLICATE_SUFFIX = "-replicate"
# prefix of a claim job's inputs that are its replicate studies' tables
REPLICATE_INPUT = "replicate__"


def replicate_name(study: str) -> str:
    return f"{study}{REPLICATE_SUFFIX}"


def _claim_study_names(cfg: dict) -> list[str]:
    names: list[str] = []
    for ccfg in (cfg.get("claims") or {}).values():
        s = (ccfg or {}).get("study")
        for name in (s if isinstance(s, (list, tuple)) else [s]):
            if name not in names:
                names.append(name)
    return names


def add_replicate_studies(cfg: dict) -> dict:
    """``cfg`` with a replicate of every claim study when ``replicate_seeds`` is set (in place; returned)."""
    seeds = list(cfg.get("replicate_seeds") or [])
    if not seeds:
        return cfg
    studies = cfg["studies"]
    for name in _claim_study_names(cfg):
        if name not in studies:
            continue  # check_semantics names the claim and the missing study
        overlap = sorted(set(seeds) & set(studies[name]["seeds"]))
        if overlap:
            raise ConfigError(f"replicate_seeds: {overlap} are also seeds of study {name!r}; a replicate needs seeds "
                              f"that no model of the study it replicates was trained with")
        rname = replicate_name(name)
        if rname in studies:
            raise ConfigError(f"studies.{rname}: the name of {name!r}'s replicate study (replicate_seeds is set); "
                              f"rename the study")
        studies[rname] = {**copy.deepcopy(studies[name]), "seeds": seeds}
    return cfg


def replicate_of(cfg: dict) -> dict[str, str]:
    """{replicate study: the study it replicates} of a resolved config."""
    if not cfg.get("replicate_seeds"):
        return {}
    return {replicate_name(s): s for s in _claim_study_names(cfg) if replicate_name(s) in cfg["studies"]}


def replicate_claim_cfg(ccfg: dict) -> dict:
    """A claim's config with its study (or studies) replaced by their replicates."""
    s = ccfg["study"]
    return {**ccfg, "study": [replicate_name(x) for x in s] if isinstance(s, (list, tuple)) else replicate_name(s)}
