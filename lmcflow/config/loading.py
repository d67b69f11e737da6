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
        cfg = deep_merge(cfg, dict(overrides))
        source += " with --config overrides"
    return validate_config(cfg, source)
