"""Which models train together (bundles) and which seed pairs are merged together (pair blocks).

A bundle is a block of seed *values* of one point: seeds ``[b·K, (b+1)·K)`` with ``K = train.bundle``
form bundle ``b``. Membership depends on nothing but the seed and K, so adding seeds n, n+1, … to a
study never reshuffles existing bundles: only the bundles holding new seeds train, and only the pair
blocks holding new pairs merge. (Seeds added *inside* a partly filled block retrain that block.)

A pair block ``(i, j)`` with ``i ≤ j`` holds every seed pair (a, b), a < b, with a in bundle i and b in
bundle j: one merge / alignment / analysis job evaluates all of them, loading each model once.
"""
from __future__ import annotations

import itertools

from lmcflow.config import Point


def seed_block(seed: int, size: int) -> int:
    return int(seed) // int(size)


def seed_blocks(point: Point) -> dict[int, list[int]]:
    """{bundle index: sorted seeds} of a point (``train.bundle`` seeds per bundle)."""
    out: dict[int, list[int]] = {}
    for s in sorted(point.seeds):
        out.setdefault(seed_block(s, point.train["bundle"]), []).append(int(s))
    return out


def pair_blocks(point: Point) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """{(bundle i, bundle j), i ≤ j: the seed pairs (a, b), a < b, between them}; blocks without pairs are left out."""
    blocks = seed_blocks(point)
    out = {}
    for i, j in itertools.combinations_with_replacement(sorted(blocks), 2):
        pairs = list(itertools.combinations(blocks[i], 2)) if i == j else [(a, b) for a in blocks[i] for b in blocks[j]]
        if pairs:
            out[(i, j)] = pairs
    return out


def blocks_label(i: int, j: int) -> str:
    return f"{i}-{j}"


def parse_blocks(label: str) -> tuple[int, int]:
    i, j = label.split("-")
    return int(i), int(j)
