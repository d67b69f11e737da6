"""A run's points, grid groups and seed blocks, and what one job of them reads (no Snakemake).

A train job trains one bundle: a block of seed values (lmcflow.grouping) of every point of a grid group (the
points of a study whose models stack: lmcflow.grouping.grid_groups; most groups are one point) into a directory
holding one checkpoint and one run row per model. Merge and analysis jobs serve a group and one pair block;
alignment and mechanism jobs one point and one pair block.

``build_grid`` checks a resolved config and computes everything first; ``Grid`` only holds the finished values
and answers questions about them. Functions taking ``wc`` take a wildcards-like object (any object with the
rule's wildcards as attributes), as Snakemake passes them.
"""
from __future__ import annotations

from lmcflow.claims import REGISTRY as CLAIMS
from lmcflow.config import (
    analysis_params,
    check_semantics,
    expand_points,
    many_sizes,
    replicate_of,
    study_points,
    swept_values,
)
from lmcflow.config.catalog import ARCHITECTURES, dataset_names
from lmcflow.config.partners import REAL, real_point_id
from lmcflow.config.point_schema import validate_points
from lmcflow.grouping import all_grid_groups, pair_blocks, parse_blocks
from lmcflow.plan.kept import group_blocks
from lmcflow.plan.paths import Paths
from lmcflow.plan.requests import check_limits, group_fits


def is_merged(p) -> bool:
    """Whether a point's seed pairs are merged: a trained point, or a null-partner point (even untrained)."""
    return p.train["epochs"] > 0 or p.partner != REAL


class PlanError(LookupError):
    """A wildcard names no point or grid group of the config."""


def build_grid(config: dict, enforce_limits: bool = True) -> Grid:
    """The grid of a resolved config (``resolve_config``); raises ``ConfigError`` where it is invalid, or
    (``enforce_limits``) where a job cannot fit ``cluster.max_runtime`` / ``cluster.max_mem_mb``."""
    check_semantics(config, CLAIMS, dataset_names(config["data"]), ARCHITECTURES)
    points = expand_points(config)
    validate_points(points)
    paths = Paths(config["paths"]["results"], config["paths"]["work"], config["paths"]["logs"])
    # (study, group) -> [Point]; groups split where a job would exceed the cluster limit
    groups = all_grid_groups(points, group_fits(config))
    if enforce_limits:
        check_limits(groups, points, config)
    # (study, group) -> {bundle label: seeds}: the seed blocks, with finished bundles kept where seeds were added
    blocks = {(s, g): group_blocks(config, paths, s, g, pts) for (s, g), pts in groups.items()}
    return Grid(config, paths, points, groups, blocks)


class Grid:
    """The points, grid groups and seed blocks of a run, the models each holds, and what a job of them reads."""

    def __init__(self, config: dict, paths: Paths, points: dict, groups: dict, blocks: dict):
        self.config, self.paths, self.points, self.groups, self.blocks = config, paths, points, groups, blocks
        self.studies = list(config["studies"])
        self.replicates = replicate_of(config)  # {replicate study: the study it replicates}
        # the studies whose figures and Table-1 rows a run makes: a replicate only decides its claims again
        self.figure_studies = [s for s in self.studies if s not in self.replicates]
        self.group_of = {(s, p.point): g for (s, g), pts in groups.items() for p in pts}
        self.block_of = {key: {seed: b for b, seeds in bl.items() for seed in seeds} for key, bl in blocks.items()}

    # ----------------------------------------------------------------------- points and grid groups
    def point_of(self, wc):
        try:
            return self.points[(wc.study, wc.point)]
        except KeyError:
            known = sorted(p for s, p in self.points if s == wc.study)
            raise PlanError(f"no point {wc.point!r} in study {wc.study!r}; known: {known}") from None

    def group_points(self, wc):
        try:
            return self.groups[(wc.study, wc.group)]
        except KeyError:
            known = sorted(g for s, g in self.groups if s == wc.study)
            raise PlanError(f"no grid group {wc.group!r} in study {wc.study!r}; known: {known}") from None

    def job_unit(self, wc):
        """The point that fixes a job's seeds, bundle size and model width: its point, or its group's first."""
        return self.group_points(wc)[0] if hasattr(wc, "group") else self.point_of(wc)

    def job_group(self, wc):
        return wc.group if hasattr(wc, "group") else self.group_of[(wc.study, wc.point)]

    def group_pair_blocks(self, study, group):
        """``pair_blocks`` of a grid group's points, over its bundles (``self.blocks``)."""
        return self.point_pair_blocks(self.groups[(study, group)][0])

    def point_pair_blocks(self, p):
        """``pair_blocks`` of a point, over its group's bundles (``self.blocks``)."""
        return pair_blocks(p, self.blocks[(p.study, self.group_of[(p.study, p.point)])])

    def study_groups(self, study):
        return [(g, pts) for (s, g), pts in self.groups.items() if s == study]

    def study_points(self, study):
        return study_points(self.points, study)

    def merged_points(self, study):
        """The points whose seed pairs are merged (and aligned, and analysed along λ): every trained point and
        every null-partner point (its pairs are real A, partner B). Untrained points (``train.epochs: 0``, e.g.
        the swap-cost arm on initialisations) have no path worth evaluating."""
        return [p for p in self.study_points(study) if is_merged(p)]

    def merged_groups(self, study):
        """The grid groups holding ``merged_points``."""
        return [(g, pts) for g, pts in self.study_groups(study) if any(is_merged(p) for p in pts)]

    def real_points(self, study):
        """A study's points without its null-partner points."""
        return [p for p in self.study_points(study) if p.partner == REAL]

    def analysis_points(self, study, flag):
        return [p for p in self.study_points(study) if analysis_params(p)[flag]]

    def many_points(self, study):
        """The points with N-way merges (``merge.many``): real models only (a merge of null partners tests nothing)."""
        return [p for p in self.real_points(study) if many_sizes(p)]

    def sweeps(self, study, key):
        return bool(swept_values(self.config["studies"][study], key))

    # ----------------------------------------------------------------------- models
    def model_bundle(self, study, point, seed):
        """(bundle directory, the point id of the model) of one model of a point; model A of a null-partner
        pair belongs to the real point."""
        p = self.points[(study, point)]
        if p.partner != REAL and int(seed) not in p.seeds:
            point = real_point_id(p)
        group = self.group_of[(study, point)]
        return self.paths.bundle_dir(study, group, self.block_of[(study, group)][int(seed)]), point

    def model_paths(self, study, point, seed):
        """[checkpoint, run row] of one trained model, inside its bundle's directory."""
        d, point = self.model_bundle(study, point, seed)
        return self.paths.member_files(study, self.group_of[(study, point)], point, d, seed)

    def pair_models(self, study, point, pairs):
        """{seed: [checkpoint, run row]} of every model of some seed pairs of a point."""
        return {s: self.model_paths(study, point, s) for s in sorted({s for pair in pairs for s in pair})}

    def point_alignments(self, study, point, blocks, methods):
        """{method: [permutation file, alignment rows]} of rule align for the non-identity ``methods``."""
        return {
            m: [self.paths.align_file(study, point, m, blocks), self.paths.align_row_file(study, point, m, blocks)]
            for m in methods
            if m != "identity"
        }

    # ----------------------------------------------------------------------- what one job reads
    def block_seeds(self, wc):
        """The seeds of a seed-block job (``wc.block``)."""
        return self.blocks[(wc.study, self.job_group(wc))][wc.block]

    def block_pairs(self, wc):
        """The seed pairs of a pair-block job (``wc.blocks``)."""
        return self.point_pair_blocks(self.job_unit(wc))[parse_blocks(wc.blocks)]

    def block_bundles(self, wc):
        """The bundle directories a pair-block job reads (one or two; a null-partner pair block: the real
        point's bundle of A and the partner's of B)."""
        group = self.job_group(wc)
        unit = self.job_unit(wc)
        if unit.partner == REAL:
            return sorted({self.paths.bundle_dir(wc.study, group, b) for b in parse_blocks(wc.blocks)})
        pts = self.group_points(wc) if hasattr(wc, "group") else [unit]
        return sorted({self.model_bundle(wc.study, p.point, s)[0] for p in pts for pair in self.block_pairs(wc)
                       for s in pair})

    def block_models(self, wc):
        """{seed: [checkpoint, run row]} of every model of a point's pair block."""
        return self.pair_models(wc.study, wc.point, self.block_pairs(wc))

    def group_models(self, wc):
        """{point: {seed: [checkpoint, run row]}} of a seed-block job's models, every point of its group."""
        seeds = self.block_seeds(wc)
        return {p.point: {s: self.model_paths(wc.study, p.point, s) for s in seeds} for p in self.group_points(wc)}

    def group_data(self, wc):
        """{dataset: prepared file} of a group job's points."""
        return {p.dataset: self.paths.data_file(p.dataset) for p in self.group_points(wc)}

    def group_data_files(self, wc):
        return sorted(self.group_data(wc).values())

    def point_data_file(self, wc):
        return self.paths.data_file(self.point_of(wc).dataset)

    def group_analysis_points(self, wc, flag):
        """The points of a group job's group with ``analysis.<flag>`` on."""
        return [p for p in self.group_points(wc) if analysis_params(p)[flag]]
