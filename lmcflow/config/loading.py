"""Which config a run uses (``resolve_config``): the embedded ``config/config.yaml``, or the ``--configfile``
file(s) instead, with ``--config key=value`` overrides on top; checked against the JSON schema, which fills in
every default."""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from lmcflow.schema import fill_defaults, load_schema

POINT_BLOCKS = ("model", "train", "merge", "analysis")
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "config/config.yaml"
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


def validate_config(cfg: dict, source: str = "config") -> dict:
    """Schema check (the message names the key) and defaults filled in; returns ``cfg``."""
    import jsonschema  # ~60 ms of import: jobs that only rebuild Points from dicts never validate

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


def _typed(value):
    """A ``--config`` value with the scalars inside lists and mappings typed as YAML types them: Snakemake
    parses those with YAML's base loader, which leaves every scalar a string (``[5, 6]`` → ``['5', '6']``)."""
    if isinstance(value, list):
        return [_typed(v) if isinstance(v, (list, dict)) else _scalar(v) for v in value]
    if isinstance(value, dict):
        return {k: _typed(v) if isinstance(v, (list, dict)) else _scalar(v) for k, v in value.items()}
    return value


def _scalar(v):
    return yaml.safe_load(v) if isinstance(v, str) else v


def resolve_config(configfiles=(), overrides: dict | None = None, default_path=DEFAULT_CONFIG) -> dict:
    """The config of a run: the embedded default, or the given config files (merged in order) on top of the
    default's settings without its studies and claims; ``overrides`` (``--config key=value``) last."""

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
