"""Which finished bundles a run keeps when seeds are added (docs/usage.md, "Incremental runs, bundles and grid
groups"): decided from the config and what is on disk, nothing else.

A train job records its members (``MEMBERS_FILE``) in its bundle directory. Where a model's bits provably do not
depend on its bundle-mates (``keeps_bundles``), a finished bundle whose members are a part of its seed block's
seeds is kept as it is, and the block's other seeds form a bundle of their own
(``lmcflow.grouping.extended_blocks``): the kept bundle's job keeps its params, so Snakemake reruns nothing of it.
"""
from __future__ import annotations

import json
from pathlib import Path

from lmcflow.config.partners import REAL, partner_kinds
from lmcflow.grouping import extended_blocks, seed_blocks
from lmcflow.io import write_json

MEMBERS_FILE = "members.json"  # {"seeds": [...]} of a bundle, written by its train job


def keeps_bundles(config: dict, points: list) -> bool:
    """Whether a grid group's bundles may be kept when seeds are added: CPU training (``device: cpu``) on one
    thread (``threads.train: 1``) of MLPs (``model.arch: mlp``) without null partners. There each member's
    layers are batched matrix products and element-wise operations whose per-member shapes do not depend on the
    bundle's size, computed one member after the other on one thread, so a member's bits are those of a bundle of
    its own (``tests/test_incremental_seeds.py`` checks a kept bundle plus a new one against a straight run, byte
    for byte). On a GPU (kernels chosen by the batch's shape), with several threads (work split by shape) or for
    convolutional nets (MKL's GEMM blocking by shape, docs/usage.md) it does not hold."""
    return (config["device"] == "cpu" and int(config["threads"]["train"]) == 1
            and all(p.model["arch"] == "mlp" and p.partner == REAL and not partner_kinds(p) for p in points))


def record_members(directory, seeds) -> None:
    """Record a finished bundle's seeds in its directory (rule train, after every model is written)."""
    write_json(Path(directory) / MEMBERS_FILE, {"seeds": sorted(int(s) for s in seeds)})


def bundle_members(directory) -> list[int] | None:
    """The seeds a finished train job recorded in a bundle directory; None without a readable record."""
    try:
        seeds = json.loads((Path(directory) / MEMBERS_FILE).read_text())["seeds"]
        return sorted(int(s) for s in seeds)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def group_blocks(config: dict, paths, study: str, group: str, points: list) -> dict[str, list[int]]:
    """{bundle label: seeds} of a grid group: its seed blocks (``seed_blocks``), where ``keeps_bundles`` with the
    finished bundles on disk kept. A bundle is kept when its recorded members lie within its seed block's seeds
    and every member's checkpoint and run row exist for every point of the group. ``paths``: the run's
    ``lmcflow.plan.paths.Paths``."""
    blocks = seed_blocks(points[0])
    if not keeps_bundles(config, points):
        return blocks
    kept: dict[str, list[int]] = {}
    for b, seeds in blocks.items():
        free = set(seeds)
        for label in [b, *(f"{b}s{s}" for s in seeds)]:
            directory = paths.bundle_dir(study, group, label)
            members = bundle_members(directory)
            if members and set(members) <= free and all(
                    Path(f).is_file() for p in points for s in members
                    for f in paths.member_files(study, group, p.point, directory, s)):
                kept[label] = members
                free -= set(members)
    return extended_blocks(blocks, kept)
