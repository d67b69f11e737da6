"""Validation of expanded study points against the config schema.

The schema checks the config as written; a sweep can still put a wrong value
into a point (e.g. ``model.width: [0.5, "wide"]``). Each expanded point's
blocks are checked against the same schema definitions, naming the study,
point and key.
"""
from __future__ import annotations

import jsonschema
import yaml

from lmcflow.config import ConfigError


def validate_points(points: dict, schema_path: str) -> None:
    with open(schema_path) as fh:
        schema = yaml.safe_load(fh)
    defs = schema["$defs"]
    for (study, pid), point in points.items():
        for block in ("model", "train", "merge", "analysis"):
            sub = {"$defs": defs, **defs[block]}
            try:
                jsonschema.validate(getattr(point, block), sub)
            except jsonschema.ValidationError as err:
                key = ".".join(str(p) for p in err.absolute_path)
                raise ConfigError(f"studies.{study} (point {pid}): {block}.{key}: {err.message}") from None
