"""Permutation sets of a pair block in one safetensors file, and their verified reading.
"""
from __future__ import annotations

import torch

from lmcflow.io import load_tensors, save_tensors


def save_permutation_sets(path, sets: dict, info: dict) -> str:
    """Save {(seed_a, seed_b): {group: perm}} as int64 tensors ``pair-<a>-<b>/<group>`` with ``info`` as
    metadata; returns the file's SHA-256."""
    tensors = {f"pair-{a}-{b}/{g}": p.to(torch.int64) for (a, b), perms in sets.items() for g, p in perms.items()}
    return save_tensors(path, tensors, {**info, "pairs": [list(k) for k in sets]})


def load_permutation_sets(path, expected_sha256: str | None = None) -> tuple[dict, dict]:
    """({(seed_a, seed_b): {group: perm}}, metadata) of a file written by ``save_permutation_sets``."""
    tensors, info = load_tensors(path, expected_sha256, rebuild_hint="rule align")
    sets: dict = {}
    for key, value in tensors.items():
        pair, group = key.split("/", 1)
        _, a, b = pair.split("-")
        sets.setdefault((int(a), int(b)), {})[group] = value
    return sets, info

