# Helpers shared by every rule file: config validation, point expansion, paths and targets.
import math
import os
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

# The lmcflow of this checkout, for the DAG and for every job (script: processes and cluster jobs
# inherit the environment), whatever venv is active: two clones sharing one venv never mix code.
CHECKOUT = str(Path(workflow.basedir))
sys.path.insert(0, CHECKOUT)
os.environ["PYTHONPATH"] = os.pathsep.join([CHECKOUT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != CHECKOUT])

from lmcflow.config import ConfigError, expand_points, check_semantics, study_points, swept_values
from lmcflow.claims import REGISTRY as CLAIMS, claim_studies
from lmcflow.data import dataset_names
from lmcflow.models import ARCHITECTURES
from lmcflow.validation import validate_points

SCHEMA = str(Path(workflow.basedir) / "workflow/schemas/config.schema.yaml")
validate(config, schema=SCHEMA)
try:
    check_semantics(config, CLAIMS, dataset_names(config["data"]), ARCHITECTURES)
    POINTS = expand_points(config)
    validate_points(POINTS, SCHEMA)
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
    seed=r"\d+",
    seed_a=r"\d+",
    seed_b=r"\d+",
    method="[a-z_]+",
    dataset="[A-Za-z0-9_-]+",


def point_of(wc):
    try:
        return POINTS[(wc.study, wc.point)]
    except KeyError:
        raise WorkflowError(f"no point {wc.point!r} in study {wc.study!r}; "
                            f"known: {sorted(p for s, p in POINTS if s == wc.study)}")


def data_file(dataset):
    return f"{WORK}/data/{dataset}.safetensors"


def model_file(study, point, seed):
    return f"{WORK}/models/{study}/{point}/seed-{seed}.safetensors"


def run_row_file(study, point, seed):
    return f"{WORK}/models/{study}/{point}/seed-{seed}.run.parquet"


def merge_file(study, point, method, a, b):
    return f"{WORK}/merge/{study}/{point}/{method}/pair-{a}-{b}.parquet"


def study_table(study, kind):
    return f"{WORK}/tables/{study}/{kind}.parquet"


def point_resources(block, key, default):
    """Per-job resources from the config point (train.resources / merge.resources).

    ``runtime`` and ``mem_mb`` are given for width 1 and scale as max(1, width)**width_exponent
    (compute of MLP hidden layers and conv layers grows with width squared), so one study
    asks SLURM for short jobs at narrow widths and long ones at wide widths.
    """
    def get(wc):
        point = point_of(wc)
        res = getattr(point, block).get("resources") or {}
        value = res.get(key, default)
        if key in ("runtime", "mem_mb"):
            value = value * max(1.0, float(point.model["width"])) ** float(res.get("width_exponent", 0))
        return int(math.ceil(value))
    return get


def study_inputs(study, kind):
    """Per-job files that a study's table concatenates."""
    pts = study_points(POINTS, study)
    if kind == "runs":
        return [run_row_file(study, p.point, s) for p in pts for s in p.seeds]
    if kind == "interpolation":
        return [merge_file(study, p.point, m, a, b) for p in pts for m in merge_methods(p) for a, b in p.pairs]
    if kind in ALIGN_TABLE_KINDS:
        return align_study_inputs(study, kind)
    raise ValueError(kind)


def sweeps(study, key):
    return bool(swept_values(config["studies"][study], key))


def width_figures(study):
    names = ["barrier_vs_width", "error_along_lambda", "loss_barrier_raw_vs_calibrated"]
    return [f"{RESULTS}/figures/{study}/{n}.{ext}" for n in names for ext in ("png", "pdf")]


def figure_targets():
    out = []
    for study in STUDIES:
        if sweeps(study, "model.width"):
            out += width_figures(study)
        out += ident_figures(study)
        out += mechanism_figures(study)
    return out


def claim_study_tables(wc):
    """The tables a claim reads, per kind one file per study it reads (Table-1 claims may read several)."""
    studies = claim_studies(CLAIM_CFG[wc.claim])
    return {kind: [study_table(s, kind) for s in studies] for kind in CLAIMS[wc.claim].tables}


def claim_points(wc):
    return [p.to_dict() for s in claim_studies(CLAIM_CFG[wc.claim]) for p in study_points(POINTS, s)]


def all_targets():
    tables = [f"{RESULTS}/tables/{k}.parquet" for k in ("runs", "interpolation", "barriers")]
    claims = [f"{RESULTS}/claims/{c}.json" for c in CLAIM_CFG]
    if claims:
        tables.append(f"{RESULTS}/tables/claims.parquet")
    tables += [f"{RESULTS}/tables/{k}.parquet" for k in IDENT_TABLE_KINDS if table_studies(k)]
    tables += [f"{RESULTS}/tables/{k}.parquet" for k in ALIGN_TABLE_KINDS if align_table_needed(k)]
    return tables + figure_targets() + claims


# --------------------------------------------------------------------------- identifiability paper
from lmcflow.config import analysis_params
from lmcflow.tables import IDENT_TABLE_KINDS

# identifiability table kind -> the analysis flag (studies.<s>.analysis.<flag>) of the points that produce it
IDENT_TABLE_FLAG = {"identifiability": "identifiability", "identifiability_lmc": "identifiability",
                    "swap_costs": "swap_costs", "swap_matrix": "swap_costs", "coherence": "coherence"}


def analysis_points(study, flag):
    return [p for p in study_points(POINTS, study) if analysis_params(p)[flag]]


def table_studies(kind):
    """Studies that have a table of this kind (every study has the foundation tables)."""
    if kind not in IDENT_TABLE_FLAG:
        return STUDIES
    return [s for s in STUDIES if analysis_points(s, IDENT_TABLE_FLAG[kind])]


def ident_point_file(study, point, kind):
    """Per-point output of rule identifiability (all seed pairs) or swap_costs (all seeds)."""
    return f"{WORK}/identifiability/{study}/{point}/{kind}.parquet"


def point_models(wc):
    """{seed: checkpoint} and {seed: run row} of every seed of a point, as named inputs."""
    p = point_of(wc)
    return {**{f"ckpt_{s}": model_file(wc.study, wc.point, s) for s in p.seeds},
            **{f"row_{s}": run_row_file(wc.study, wc.point, s) for s in p.seeds}}


def ident_study_inputs(study, kind):
    """Per-job files that a study's identifiability table concatenates."""
    return [ident_point_file(study, p.point, kind) for p in analysis_points(study, IDENT_TABLE_FLAG[kind])]


IDENT_FIGURES = {"identifiability": ["objective_vs_sigma_f", "barrier_vs_sigma_f"],
                 "swap_costs": ["swap_cost_heatmaps", "swap_cost_vs_k"],
                 "coherence": ["barrier_vs_nu"]}


def ident_figures(study):
    return [f"{RESULTS}/figures/{study}/{name}.{ext}" for flag, names in IDENT_FIGURES.items()
            if analysis_points(study, flag) for name in names for ext in ("png", "pdf")]


def data_cfg_for(dataset):
    """The part of config["data"] that one dataset's preparation reads (adding a dataset reruns no other)."""
    d = config["data"]
    out = {k: d[k] for k in ("search_paths", "download", "val_size", "split_seed") if k in d}
    for group in ("synthetic", "subsets"):
        if dataset in (d.get(group) or {}):
            out[group] = {dataset: d[group][dataset]}
    return out


# --------------------------------------------------------------------------- alignment and mechanism
from lmcflow.config import mechanism_methods, merge_methods

ALIGN_TABLE_KINDS = ("alignment", "layer_metrics")


def align_file(study, point, method, a, b):
    return f"{WORK}/align/{study}/{point}/{method}/pair-{a}-{b}.safetensors"


def align_row_file(study, point, method, a, b):
    return f"{WORK}/align/{study}/{point}/{method}/pair-{a}-{b}.parquet"


def mechanism_file(study, point, method, a, b):
    return f"{WORK}/mechanism/{study}/{point}/{method}/pair-{a}-{b}.parquet"


def alignment_inputs(wc):
    """[permutation file, alignment row] of rule align for a merge/mechanism job; none for identity."""
    if wc.method == "identity":
        return []
    args = (wc.study, wc.point, wc.method, wc.seed_a, wc.seed_b)
    return [align_file(*args), align_row_file(*args)]


def align_study_inputs(study, kind):
    pts = study_points(POINTS, study)
    if kind == "alignment":
        return [align_row_file(study, p.point, m, a, b)
                for p in pts for m in merge_methods(p) if m != "identity" for a, b in p.pairs]
    if kind == "layer_metrics":
        return [mechanism_file(study, p.point, m, a, b) for p in pts for m in mechanism_methods(p) for a, b in p.pairs]
    raise ValueError(kind)


def align_table_needed(kind):
    """The global alignment / layer_metrics table is a target when some study produces rows for it."""
    return any(align_study_inputs(s, kind) for s in STUDIES)


def mechanism_figures(study):
    if not (sweeps(study, "model.width") and align_study_inputs(study, "layer_metrics")):
        return []
    names = ["method_barrier_vs_width", "lewc_vs_width", "cross_ratio_vs_width", "rank_vs_width",
             "weight_decay_comparison"]
    return [f"{RESULTS}/figures/{study}/{n}.{ext}" for n in names for ext in ("png", "pdf")]
