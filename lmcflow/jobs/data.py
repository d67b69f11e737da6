"""Rule ``prepare_data``: one dataset downloaded or generated, split and normalised into one file."""
from __future__ import annotations

from lmcflow.data import prepare_dataset
from lmcflow.imported import prepare_custom


def run_prepare_data(dataset: str, data_cfg: dict, out: str, cache_root: str) -> None:
    custom = (data_cfg.get("custom") or {}).get(dataset)
    if custom is not None:
        prepare_custom(dataset, custom, data_cfg, out)
    else:
        prepare_dataset(dataset, data_cfg, out, cache_root)
