"""Validation of expanded study points against the config schema.

The schema checks the config as written; a sweep can still put a wrong value
into a point (e.g. ``model.width: [0.5, "wide"]``). Each expanded point's
blocks are checked against the same schema definitions, naming the study,
point and key.
"""
from __future__ import annotations

import jsonschema

from lmcflow.config import POINT_BLOCKS, ConfigError, load_schema


def validate_points(points: dict) -> None:
    defs = load_schema()["$defs"]
    for (study, pid), point in points.items():
        for block in POINT_BLOCKS:
            try:
                jsonschema.validate(getattr(point, block), {"$defs": defs, **defs[block]})
            except jsonschema.ValidationError as err:
                key = ".".join(str(p) for p in err.absolute_path)
                raise ConfigError(f"studies.{study} (point {pid}): {block}.{key}: {err.message}") from None
