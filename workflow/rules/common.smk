# Helpers shared by every rule file (config validation, point expansion, paths and targets).
import math
import os
import sys
from pathlib import Path

# The lmcflow of this checkout, for the DAG and for every job (script: processes and cluster jobs
# inherit the environment), whatever venv is active: two clones sharing one venv never mix code.
CHECKOUT = str(Path(workflow.basedir))
sys.path.insert(0, CHECKOUT)
os.environ.update(
    PYTHONPATH=os.pathsep.join(
        [CHECKOUT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != CHECKOUT]
    )
)

from lmcflow.config import (
    ConfigError,
    canonical,
    check_semantics,
    expand_points,
    resolve_config,
    study_points,
    swept_values,
)
from lmcflow.claims import REGISTRY as CLAIMS, claim_studies
from lmcflow.catalog import ARCHITECTURES, dataset_names
from lmcflow.point_schema import validate_points
from lmcflow.kernels import kernel_env

try:
    # The embedded default or the --configfile file(s), with --config overrides on top; defaults from the schema.
    _resolved = resolve_config(
        workflow.config_settings.configfiles,
        workflow.config_settings.config,
        default_path=Path(workflow.basedir) / "config/config.yaml",
    )
    config.clear()
    config.update(_resolved)
    check_semantics(config, CLAIMS, dataset_names(config["data"]), ARCHITECTURES)
    POINTS = expand_points(config)
    validate_points(POINTS)
    # Every job inherits this environment: its CPU kernels are chosen before it imports torch.
    os.environ.update(kernel_env(config["cpu_kernels"]))
except ConfigError as err:
    raise WorkflowError(f"Invalid config: {err}") from None

RESULTS = config["paths"]["results"]
WORK = config["paths"]["work"]
LOGS = config["paths"]["logs"]
CLAIM_CFG = config.get("claims") or {}
STUDIES = list(config["studies"])


wildcard_constraints:
    study="[A-Za-z0-9_-]+",
    point="[^/]+",
    group="[^/]+",
    block=r"\d+",
    blocks=r"\d+-\d+",
    method="[a-z_]+",
    dataset="[A-Za-z0-9_-]+",


def point_of(wc):
    try:
        return POINTS[(wc.study, wc.point)]
    except KeyError:
        raise WorkflowError(
            f"no point {wc.point!r} in study {wc.study!r}; known: {sorted(p for s, p in POINTS if s == wc.study)}"
        )


def data_file(dataset):
    return f"{WORK}/data/{dataset}.safetensors"


# --------------------------------------------------------------------------- grid groups, bundles and pair blocks
# A train job trains one bundle: a block of seed values (lmcflow.grouping) of every point of a grid group (the
# points of a study whose models stack: lmcflow.grouping.grid_groups; most groups are one point) into a directory
# holding one checkpoint and one run row per model. Merge and analysis jobs serve a group and one pair block;
# alignment and mechanism jobs one point and one pair block.
from lmcflow.grouping import all_grid_groups, blocks_label, pair_blocks, parse_blocks, seed_block, seed_blocks, stacks

GROUPS = all_grid_groups(POINTS)  # (study, group) -> [Point]
GROUP_OF = {(s, p.point): g for (s, g), pts in GROUPS.items() for p in pts}  # (study, point) -> group


def group_points(wc):
    try:
        return GROUPS[(wc.study, wc.group)]
    except KeyError:
        raise WorkflowError(
            f"no grid group {wc.group!r} in study {wc.study!r}; known: {sorted(g for s, g in GROUPS if s == wc.study)}"
        )


def job_unit(wc):
    """The point that fixes a job's seeds, bundle size and model width: its point, or its group's first point."""
    return group_points(wc)[0] if hasattr(wc, "group") else point_of(wc)


def study_groups(study):
    return [(g, pts) for (s, g), pts in GROUPS.items() if s == study]


def group_data(wc):
    """{dataset: prepared file} of a group job's points."""
    return {p.dataset: data_file(p.dataset) for p in group_points(wc)}


def bundle_dir(study, group, block):
    return f"{WORK}/models/{study}/{group}/bundle-{block}"


def model_paths(study, point, seed):
    """[checkpoint, run row] of one trained model, inside its bundle's directory (in a subdirectory named by its
    point when the bundle holds several points)."""
    group = GROUP_OF[(study, point)]
    d = bundle_dir(study, group, seed_block(seed, POINTS[(study, point)].train["bundle"]))
    if group != point:
        d = f"{d}/{point}"
    return [f"{d}/seed-{seed}.safetensors", f"{d}/seed-{seed}.run.parquet"]


def job_point(wc, *blocks, **keys):
    """``params.point`` of a job: the point's ``job_dict`` of whole ``blocks`` plus only the listed keys of others
    (e.g. ``merge=["alignment"]``), so a setting the job does not read never reruns it."""
    return point_job_dict(point_of(wc), *blocks, **keys)


def point_job_dict(p, *blocks, **keys):
    out = p.job_dict(*blocks)
    for block, names in keys.items():
        out[block] = canonical({k: getattr(p, block)[k] for k in names})
    return out


def block_seeds(wc):
    return seed_blocks(job_unit(wc))[int(wc.block)]


def block_pairs(wc):
    return pair_blocks(job_unit(wc))[parse_blocks(wc.blocks)]


def block_bundles(wc):
    """The bundle directories a pair-block job reads (one or two)."""
    group = wc.group if hasattr(wc, "group") else GROUP_OF[(wc.study, wc.point)]
    return sorted({bundle_dir(wc.study, group, b) for b in parse_blocks(wc.blocks)})


def pair_models(study, point, pairs):
    """{seed: [checkpoint, run row]} of every model of some seed pairs of a point."""
    return {s: model_paths(study, point, s) for s in sorted({s for pair in pairs for s in pair})}


def block_models(wc):
    """{seed: [checkpoint, run row]} of every model of a point's pair block."""
    return pair_models(wc.study, wc.point, block_pairs(wc))


def merge_file(study, point, blocks):
    return f"{WORK}/merge/{study}/{point}/blocks-{blocks}.parquet"


def study_table(study, kind):
    return f"{WORK}/tables/{study}/{kind}.parquet"


def point_resources(block, key, per_model=False):
    """Per-job resources from the config point (train.resources / merge.resources).

    ``runtime`` and ``mem_mb`` are given for width 1 and scale as max(1, width)**width_exponent
    (compute of MLP hidden layers and conv layers grows with width squared), so one study asks
    SLURM for short jobs at narrow widths and long ones at wide widths; ``per_model`` runtimes
    (training) are multiplied by the bundle's model count. A grid group's job asks for the sum of its
    points' runtimes and the largest of their other resources.
    """

    def get(wc):
        values = []
        for point in group_points(wc) if hasattr(wc, "group") else [point_of(wc)]:
            res = getattr(point, block)["resources"]
            value = res[key]
            if key in ("runtime", "mem_mb"):
                value = value * max(1.0, float(point.model["width"])) ** float(res["width_exponent"])
            if per_model and key == "runtime":
                value = value * len(block_seeds(wc))
            values.append(value)
        return int(math.ceil(sum(values) if key == "runtime" else max(values)))

    return get


def study_bundles(study):
    return [bundle_dir(study, g, b) for g, pts in study_groups(study) for b in seed_blocks(pts[0])]


def study_run_rows(study):
    return [model_paths(study, p.point, s)[1] for p in study_points(POINTS, study) for s in sorted(p.seeds)]


def merged_points(study):
    """The points whose seed pairs are merged (and aligned, and analysed along λ): every trained point. Untrained
    points (``train.epochs: 0``, e.g. the swap-cost arm on initialisations) have no path worth evaluating."""
    return [p for p in study_points(POINTS, study) if p.train["epochs"] > 0]


def merged_groups(study):
    """The grid groups holding ``merged_points``."""
    return [(g, pts) for g, pts in study_groups(study) if any(p.train["epochs"] > 0 for p in pts)]


def group_stacks(wc):
    """The point ids of each bundle of a train job: the group's points whose models stack (lmcflow.grouping.stacks)."""
    return [[p.point for p in pts] for pts in stacks(group_points(wc), config["data"])]


def study_inputs(study, kind):
    """Per-job files that a study's table concatenates (runs: the bundle directories holding the run rows)."""
    if kind == "runs":
        return study_bundles(study)
    if kind == "interpolation":
        return [merge_file(study, g, blocks_label(*b)) for g, pts in merged_groups(study) for b in pair_blocks(pts[0])]
    if kind in ALIGN_TABLE_KINDS:
        return align_study_inputs(study, kind)
    raise ValueError(kind)


def study_table_files(study, kind):
    """The parquet files a study table concatenates (runs: one row file per model inside the bundles)."""
    return study_run_rows(study) if kind == "runs" else study_inputs(study, kind)


def sweeps(study, key):
    return bool(swept_values(config["studies"][study], key))


def width_figures(study):
    names = ["barrier_vs_width", "error_along_lambda", "loss_barrier_raw_vs_calibrated", "logit_norm_along_lambda"]
    return [f"{RESULTS}/figures/{study}/{n}.{ext}" for n in names for ext in ("png", "pdf")]


# --------------------------------------------------------------------------- the width paper's Table 1 beside ours
TABLE1_TABLE = f"{RESULTS}/tables/paper_table1.parquet"
TABLE1_FIGURES = [f"{RESULTS}/figures/paper_table1.{ext}" for ext in ("png", "pdf")]


def table1_studies():
    """{study: {dataset, arch, bias}} of the width studies (sweeping model.width, one dataset, architecture and
    bias setting, an architecture of the paper's Table 1), in config order: the rows of paper_table1."""
    out = {}
    for study in STUDIES:
        pts = study_points(POINTS, study)
        kinds = {(p.dataset, p.model["arch"], bool(p.model["bias"])) for p in pts}
        if sweeps(study, "model.width") and len(kinds) == 1:
            dataset, arch, bias = kinds.pop()
            if arch in ("mlp", "vgg11", "resnet20"):
                out[study] = {"dataset": dataset, "arch": arch, "bias": bias}
    return out


def figure_targets():
    out = []
    for study in STUDIES:
        if sweeps(study, "model.width"):
            out += width_figures(study)
        out += ident_figures(study)
        out += mechanism_figures(study)
    return out


# The report's landing text: the verdict page once a run has made it, else a short static note.
FRONT_PAGE = f"{RESULTS}/report/front_page.rst"


def report_front_page():
    made = Path(FRONT_PAGE)
    return str(made.resolve()) if made.exists() else "workflow/report/workflow.rst"


def claim_study_tables(wc):
    """The tables a claim reads, per kind one file per study it reads (Table-1 claims may read several)."""
    studies = claim_studies(CLAIM_CFG[wc.claim])
    return {kind: [study_table(s, kind) for s in studies] for kind in CLAIMS[wc.claim].tables}


def claim_points(wc):
    """What a claim job needs of its studies' points (their scale), and nothing that never changes a verdict."""
    return [
        p.job_dict("model", "train") | {"seeds": p.seeds}
        for s in claim_studies(CLAIM_CFG[wc.claim])
        for p in study_points(POINTS, s)
    ]


def all_targets():
    tables = [f"{RESULTS}/tables/{k}.parquet" for k in ("runs", "interpolation", "barriers")]
    claims = [f"{RESULTS}/claims/{c}.json" for c in CLAIM_CFG]
    if claims:
        tables += [f"{RESULTS}/tables/claims.parquet", FRONT_PAGE]
    tables += [f"{RESULTS}/tables/{k}.parquet" for k in IDENT_TABLE_KINDS if table_studies(k)]
    tables += [f"{RESULTS}/tables/{k}.parquet" for k in ALIGN_TABLE_KINDS if align_table_needed(k)]
    if table1_studies():
        tables += [TABLE1_TABLE] + TABLE1_FIGURES
    return tables + figure_targets() + claims + PROVENANCE_FILES


PROVENANCE_FILES = [f"{RESULTS}/provenance.json", f"{RESULTS}/provenance.html"]


# --------------------------------------------------------------------------- identifiability paper
from lmcflow.config import analysis_params
from lmcflow.tables import IDENT_TABLE_KINDS

# identifiability table kind -> the analysis flag (studies.<s>.analysis.<flag>) of the points that produce it
IDENT_TABLE_FLAG = {
    "identifiability": "identifiability",
    "identifiability_lmc": "identifiability",
    "swap_costs": "swap_costs",
    "swap_matrix": "swap_costs",
    "coherence": "coherence",
}


# analysis keys each identifiability job reads (its params carry these only)
IDENT_ANALYSIS_KEYS = {
    "identifiability": ["identifiability", "n_random", "n_samples", "matching_features", "matching_similarities"],
    "swap_costs": [
        "swap_costs",
        "n_samples",
        "var_threshold",
        "heatmap_units",
        "swap_layers",
        "ridge_beta",
        "ridge_steps",
        "ridge_lr",
        "anisotropy_delta",
    ],
    "coherence": ["coherence", "n_samples", "var_threshold"],
}


def analysis_points(study, flag):
    return [p for p in study_points(POINTS, study) if analysis_params(p)[flag]]


def table_studies(kind):
    """Studies that have a table of this kind (every study has the foundation tables)."""
    if kind in ALIGN_TABLE_KINDS:
        return [s for s in STUDIES if align_study_inputs(s, kind)]
    if kind not in IDENT_TABLE_FLAG:
        return STUDIES
    return [s for s in STUDIES if analysis_points(s, IDENT_TABLE_FLAG[kind])]


def ident_point_file(study, group, kind, blocks):
    """Output of rule identifiability for one grid group and pair block, or of rule swap_costs for one grid group
    and bundle (``blocks``)."""
    return f"{WORK}/identifiability/{study}/{group}/{kind}-{blocks}.parquet"


def group_analysis_points(wc, flag):
    """The points of a group job's group with ``analysis.<flag>`` on."""
    return [p for p in group_points(wc) if analysis_params(p)[flag]]


def identity_paths_file(wc):
    """Rule interpolate's file of the group and pair block when it holds identity paths rule identifiability
    reads."""
    if any(p.train["epochs"] > 0 and "identity" in merge_methods(p) for p in group_points(wc)):
        return [merge_file(wc.study, wc.group, wc.blocks)]
    return []


def ident_study_inputs(study, kind):
    """Per-job files that a study's identifiability table concatenates (one per group with a flagged point)."""
    flag = IDENT_TABLE_FLAG[kind]
    groups = [(g, pts) for g, pts in study_groups(study) if any(analysis_params(p)[flag] for p in pts)]
    if kind in ("swap_costs", "swap_matrix"):
        return [ident_point_file(study, g, kind, b) for g, pts in groups for b in seed_blocks(pts[0])]
    return [ident_point_file(study, g, kind, blocks_label(*b)) for g, pts in groups for b in pair_blocks(pts[0])]


IDENT_FIGURES = {
    "identifiability": ["objective_vs_sigma_f", "barrier_vs_sigma_f", "matching_modes"],
    "swap_costs": [
        "swap_cost_heatmaps",
        "swap_cost_vs_k",
        "swap_cost_heatmaps_ridge",
        "ridge_vs_closed_form",
        "representation_geometry",
    ],
    "coherence": ["barrier_vs_nu"],
}


def lmc_vs_k_study(study):
    """Studies with the unaligned-LMC-vs-k figure: swap costs (the data's k) and trained, merged models over a
    dataset sweep."""
    return bool(analysis_points(study, "swap_costs") and merged_points(study) and sweeps(study, "dataset"))


def ident_figures(study):
    names = [name for flag, names in IDENT_FIGURES.items() if analysis_points(study, flag) for name in names]
    if lmc_vs_k_study(study):
        names.append("lmc_vs_k")
    return [f"{RESULTS}/figures/{study}/{name}.{ext}" for name in names for ext in ("png", "pdf")]


def data_cfg_for(dataset):
    """The part of config["data"] that one dataset's preparation reads (adding a dataset reruns no other)."""
    d = config["data"]
    out = {k: d[k] for k in ("search_paths", "download", "val_size", "split_seed") if k in d}
    for group in ("synthetic", "subsets"):
        if dataset in (d.get(group) or {}):
            out[group] = {dataset: d[group][dataset]}
    return canonical(out)


# --------------------------------------------------------------------------- alignment and mechanism
from lmcflow.config import mechanism_methods, merge_methods

ALIGN_TABLE_KINDS = ("alignment", "layer_metrics")


def align_file(study, point, method, blocks):
    return f"{WORK}/align/{study}/{point}/{method}/blocks-{blocks}.safetensors"


def align_row_file(study, point, method, blocks):
    return f"{WORK}/align/{study}/{point}/{method}/blocks-{blocks}.parquet"


def mechanism_file(study, point, method, blocks):
    return f"{WORK}/mechanism/{study}/{point}/{method}/blocks-{blocks}.parquet"


def block_alignments(wc, methods):
    """{method: [permutation file, alignment rows]} of rule align for the non-identity ``methods``."""
    return point_alignments(wc.study, wc.point, wc.blocks, methods)


def point_alignments(study, point, blocks, methods):
    return {
        m: [align_file(study, point, m, blocks), align_row_file(study, point, m, blocks)]
        for m in methods
        if m != "identity"
    }


def align_study_inputs(study, kind):
    pts = merged_points(study)
    if kind == "alignment":
        return [
            align_row_file(study, p.point, m, blocks_label(*b))
            for p in pts
            for m in merge_methods(p)
            if m != "identity"
            for b in pair_blocks(p)
        ]
    if kind == "layer_metrics":
        return [
            mechanism_file(study, p.point, m, blocks_label(*b))
            for p in pts
            for m in mechanism_methods(p)
            for b in pair_blocks(p)
        ]
    raise ValueError(kind)


def align_table_needed(kind):
    """The global alignment / layer_metrics table is a target when some study produces rows for it."""
    return any(align_study_inputs(s, kind) for s in STUDIES)


def mechanism_figures(study):
    if not (sweeps(study, "model.width") and align_study_inputs(study, "layer_metrics")):
        return []
    names = [
        "method_barrier_vs_width",
        "lewc_vs_width",
        "cross_ratio_vs_width",
        "rank_vs_width",
        "weight_decay_comparison",
    ]
    return [f"{RESULTS}/figures/{study}/{n}.{ext}" for n in names for ext in ("png", "pdf")]


def merge_entries(wc):
    """Rule interpolate's ``run_merge_group`` entries: per trained point of the group, what its paths depend on."""
    pairs = block_pairs(wc)
    return [
        {
            "point": p.job_dict("model", "train", "merge"),
            "methods": merge_methods(p),
            "models": pair_models(wc.study, p.point, pairs),
            "alignment": point_alignments(wc.study, p.point, wc.blocks, merge_methods(p)),
        }
        for p in group_points(wc)
        if p.train["epochs"] > 0
    ]
