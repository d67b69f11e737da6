"""The config schema ``workflow/schemas/config.schema.yaml`` and the defaults it holds.

Every default of a config key is the ``default:`` of that key in the schema; this module reads them so that
``lmcflow.config`` (resolution, points) and ``lmcflow.config.catalog`` (torch-free checks) share one source.
"""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow/schemas/config.schema.yaml"


@functools.lru_cache(maxsize=1)
def load_schema() -> dict:
    # libyaml's safe loader where PyYAML has it: the same mapping, ~0.01 s where the pure-Python loader takes ~0.2 s,
    # in every Snakemake start and every job that rebuilds a Point
    return yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@functools.cache
def schema_validator(block: str | None = None):
    """The jsonschema validator of the whole config (``block`` None) or of one point block's definition, made once
    per process. The schema is checked against its metaschema once, as a whole (its block definitions with it):
    ``jsonschema.validate`` checks it again on every call, about 0.1 CPU-s each, six times in a plan's making."""
    import jsonschema  # ~60 ms of import: jobs that only rebuild Points from dicts never validate

    root = load_schema()
    if block is None:
        cls = jsonschema.validators.validator_for(root)
        cls.check_schema(root)
        return cls(root)
    schema_validator()  # the check of the whole schema, this block's definition included
    schema = {"$defs": root["$defs"], **root["$defs"][block]}
    return jsonschema.validators.validator_for(schema)(schema)


def _resolve_ref(sub: dict, root: dict) -> dict:
    """A sub-schema with its ``$ref`` (``#/$defs/name``) inlined; local keys (e.g. ``default``) win."""
    while isinstance(sub, dict) and "$ref" in sub:
        name = sub["$ref"].rsplit("/", 1)[-1]
        sub = {**root["$defs"][name], **{k: v for k, v in sub.items() if k != "$ref"}}
    return sub


def fill_defaults(instance: dict, schema: dict, root: dict | None = None) -> dict:
    """Fill schema ``default:`` values into ``instance`` in place, recursively through nested objects."""
    root = root or load_schema()
    schema = _resolve_ref(schema, root)
    if not isinstance(instance, dict):
        return instance
    for key, sub in (schema.get("properties") or {}).items():
        sub = _resolve_ref(sub, root)
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if isinstance(instance.get(key), dict):
            fill_defaults(instance[key], sub, root)
    return instance


@functools.cache
def _block_defaults(block: str) -> dict:
    root = load_schema()
    return fill_defaults({}, root["$defs"][block], root)


def block_defaults(block: str) -> dict:
    """A copy of the schema defaults of one point block (``model``, ``train``, ``merge``, ``analysis``)
    or of ``symmetry``."""
    return copy.deepcopy(_block_defaults(block))
