"""Permutation sets of a pair block in one safetensors file, and their verified reading: the file alone
(``load_permutation_sets``) or checked against the alignment rows rule ``align`` wrote with it
(``load_alignment_block``).
"""
from __future__ import annotations

import logging

import torch

from lmcflow.config import Point
from lmcflow.io import load_tensors, save_tensors
from lmcflow.tables import read_table

log = logging.getLogger(__name__)


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


def load_alignment_block(point: Point, method: str, perm_path: str, rows_path: str) -> dict:
    """{(seed_a, seed_b): permutations} of rule ``align`` for one pair block; the rows must describe this
    point and method, and the file must match the SHA-256 recorded in them."""
    rows = read_table(rows_path, "alignment")
    got = set(zip(rows["study"], rows["point"], rows["method"]))
    if got != {(point.study, point.point, method)}:
        raise ValueError(f"{rows_path}: alignment rows are for {sorted(got)}, expected "
                         f"{(point.study, point.point, method)}; rebuild them with rule align")
    digests = set(rows["permutation_sha256"])
    if len(digests) != 1:
        raise ValueError(f"{rows_path}: the rows record {len(digests)} different permutation-file hashes; "
                         f"rebuild them with rule align")
    sets, _ = load_permutation_sets(perm_path, expected_sha256=digests.pop())
    log.info(f"[align] {method} permutations of {len(sets)} pairs from {perm_path} (hash verified)")
    return sets
