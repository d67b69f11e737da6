"""Which models train together (bundles), which grid points share jobs (grid groups) and which seed pairs
are merged together (pair blocks).

Details: docs/internals.md, "`lmcflow.grouping`".
"""
from __future__ import annotations

import itertools
import json

from lmcflow.config import Point, bundle_key, format_value, seed_pairs, study_points
from lmcflow.config.partners import REAL, partner_seed, real_seeds


def seed_block(seed: int, size: int) -> int:
    return int(seed) // int(size)


def seed_blocks(point: Point) -> dict[str, list[int]]:
    """{bundle label: sorted seeds} of a point (``train.bundle`` seeds per bundle, labelled by the bundle index
    ``seed // train.bundle``), in block order."""
    out: dict[str, list[int]] = {}
    for s in sorted(point.seeds):
        out.setdefault(str(seed_block(s, point.train["bundle"])), []).append(int(s))
    return out


def block_order(label: str) -> tuple[int, int]:
    """Sort key of a bundle label: ``b`` (seed block b) before ``bs<f>`` (the seeds of block b from f on that a
    later run added beside a kept bundle of block b, ``extended_blocks``)."""
    b, _, first = str(label).partition("s")
    return int(b), int(first) if first else -1


def extended_blocks(blocks: dict[str, list[int]], kept: dict[str, list[int]]) -> dict[str, list[int]]:
    """A point's bundles when the finished bundles ``kept`` ({label: seeds}, each within one seed block of
    ``blocks``, pairwise disjoint) are kept as they are: per seed block, the kept bundles inside it, and its
    other seeds as one more bundle, labelled ``b`` when nothing of block b is kept, else ``bs<its first
    seed>``. With nothing kept this is ``blocks``."""
    out: dict[str, list[int]] = {}
    for b, seeds in blocks.items():
        inside = {k: v for k, v in kept.items() if block_order(k)[0] == int(b)}
        out |= inside
        rest = sorted(set(seeds) - {s for v in inside.values() for s in v})
        if rest:
            out[f"{b}s{rest[0]}" if inside else b] = rest
    return dict(sorted(out.items(), key=lambda kv: block_order(kv[0])))


def pair_blocks(point: Point, blocks: dict[str, list[int]] | None = None
                ) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """{(bundle i, bundle j), i ≤ j: the seed pairs (a, b), a < b, between them}; blocks without pairs are left out.
    ``blocks``: the point's bundles (default ``seed_blocks``; a plan passes the bundles it keeps on disk).
    A null-partner point (``lmcflow.config.partners``): {(real bundle i, partner bundle j): the pairs (a, offset
    + b), a < b, of real model a and the partner of b}."""
    if point.partner != REAL:
        return _partner_pair_blocks(point)
    blocks = seed_blocks(point) if blocks is None else blocks
    merged = set(point.pairs)  # merge.pairs: every pair, or the authors' disjoint ones
    out = {}
    for i, j in itertools.combinations_with_replacement(sorted(blocks, key=block_order), 2):
        pairs = list(itertools.combinations(blocks[i], 2)) if i == j else [(a, b) for a in blocks[i] for b in blocks[j]]
        pairs = [q for q in pairs if tuple(sorted(q)) in merged]
        if pairs:
            out[(i, j)] = pairs
    return out


def _partner_pair_blocks(point: Point) -> dict[tuple[int, int], list[tuple[int, int]]]:
    size = point.train["bundle"]
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for a, b in seed_pairs(real_seeds(point), point.merge.get("pairs", "all")):
        pb = partner_seed(point.partner, b)
        out.setdefault((str(seed_block(a, size)), str(seed_block(pb, size))), []).append((a, pb))
    return dict(sorted(out.items(), key=lambda kv: tuple(block_order(b) for b in kv[0])))


def blocks_label(i: int, j: int) -> str:
    return f"{i}-{j}"


def parse_blocks(label: str) -> tuple[str, str]:
    i, j = label.split("-")
    return i, j


def grid_groups(points: list[Point], fits=None) -> dict[str, list[Point]]:
    """{group label: points} of one study's ``points`` (study order), every point in exactly one group.

    ``fits`` (optional): a predicate on a candidate group's points (every job of it within the cluster's limit,
    ``lmcflow.plan.requests.group_fits``); a group then ends before the point that would make it not fit.

    A group of several points is labelled ``grid`` followed by the sweep values its points share (e.g.
    ``grid__width-1``); no point id starts that way (each part of a point id is ``key-value``, or it is
    ``base``), so group and point directories never collide.
    """
    keyed: dict[str, list[Point]] = {}
    for p in points:
        size = int(p.train["bundle_grid"])
        if size > 1 and int(p.train["bundle"]) > 1:
            shape = {k: v for k, v in p.model.items() if k != "symmetry"}
            key = json.dumps([shape, sorted(int(s) for s in p.seeds), int(p.train["bundle"]), size], sort_keys=True,
                             default=str)
        else:  # train.bundle 1 means one model per job
            key = json.dumps(["alone", p.point])
        keyed.setdefault(key, []).append(p)
    chunks = []  # at most train.bundle_grid points per group (and what fits), in study order
    for pts in keyed.values():
        size = int(pts[0].train["bundle_grid"])
        chunk: list[Point] = []
        for p in pts:
            if chunk and (len(chunk) == size or (fits is not None and not fits([*chunk, p]))):
                chunks.append(chunk)
                chunk = []
            chunk.append(p)
        chunks.append(chunk)
    out: dict[str, list[Point]] = {}
    for members in chunks:
        if len(members) == 1:
            out[members[0].point] = members
            continue
        shared = [f"{k.split('.')[-1]}-{format_value(v)}" for k, v in members[0].swept.items()
                  if all(k in m.swept and m.swept[k] == v for m in members[1:])]
        label = "__".join(["grid", *shared])
        n = 2
        while label in out:  # two groups sharing the same sweep values: number them
            label = "__".join(["grid", *shared]) + f"-{n}"
            n += 1
        out[label] = members
    return out


def all_grid_groups(points: dict, fits=None) -> dict[tuple[str, str], list[Point]]:
    """{(study, group label): points} of every study of ``points`` ((study, point id) -> Point, config order);
    ``fits`` as in ``grid_groups``."""
    return {(study, g): pts for study in dict.fromkeys(s for s, _ in points)
            for g, pts in grid_groups(study_points(points, study), fits).items()}


def stacks(points: list[Point], data_cfg: dict | None = None) -> list[list[Point]]:
    """The points of a grid group partitioned into bundles whose models stack (equal ``bundle_key``), in order."""
    out: dict[str, list[Point]] = {}
    for p in points:
        out.setdefault(bundle_key(p, data_cfg), []).append(p)
    return list(out.values())
