"""Rule ``prepare_data``: one dataset downloaded or generated, split and normalised into one file."""
from __future__ import annotations

from lmcflow.data import prepare_dataset


def run_prepare_data(dataset: str, data_cfg: dict, out: str, cache_root: str) -> None:
    prepare_dataset(dataset, data_cfg, out, cache_root)
