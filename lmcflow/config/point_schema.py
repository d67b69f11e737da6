"""Validation of expanded study points against the config schema.

The schema checks the config as written; a sweep can still put a wrong value
into a point (e.g. ``model.width: [0.5, "wide"]``). Each expanded point's
blocks are checked against the same schema definitions, naming the study,
point and key.
"""
from __future__ import annotations

import jsonschema

from lmcflow.config.loading import POINT_BLOCKS
from lmcflow.config.schema import schema_validator
from lmcflow.errors import ConfigError


def validate_points(points: dict) -> None:
    # One validator per block (schema_validator: the schema checked once per process): jsonschema.validate re-checks
    # the schema against the metaschema on every call, ~0.07 CPU-s per point and block.
    validators = {block: schema_validator(block) for block in POINT_BLOCKS}
    for (study, pid), point in points.items():
        for block, validator in validators.items():
            err = jsonschema.exceptions.best_match(validator.iter_errors(getattr(point, block)))
            if err is not None:
                key = ".".join(str(p) for p in err.absolute_path)
                raise ConfigError(f"studies.{study} (point {pid}): {block}.{key}: {err.message}")
