# Helpers shared by every rule file: config validation, point expansion, paths and targets.
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir)))  # lmcflow importable from a plain clone

from lmcflow.config import ConfigError, expand_points, check_semantics, study_points
from lmcflow.claims import REGISTRY as CLAIMS
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
    """Per-job resources from the config point (train.resources / merge.resources)."""
    def get(wc):
        return int((getattr(point_of(wc), block).get("resources") or {}).get(key, default))
    return get


def study_inputs(study, kind):
    """Per-job files that a study's table concatenates."""
    pts = study_points(POINTS, study)
    if kind == "runs":
        return [run_row_file(study, p.point, s) for p in pts for s in p.seeds]
    if kind == "interpolation":
        return [merge_file(study, p.point, m, a, b) for p in pts for m in p.merge["methods"] for a, b in p.pairs]
    raise ValueError(kind)


def sweeps(study, key):
    return key in (config["studies"][study].get("sweep") or {})


def width_figures(study):
    names = ["barrier_vs_width", "error_along_lambda", "loss_barrier_raw_vs_calibrated"]
    return [f"{RESULTS}/figures/{study}/{n}.{ext}" for n in names for ext in ("png", "pdf")]


def figure_targets():
    out = []
    for study in STUDIES:
        if sweeps(study, "model.width"):
            out += width_figures(study)
    return out


def claim_study_tables(wc):
    claim = CLAIMS[wc.claim]
    study = CLAIM_CFG[wc.claim]["study"]
    return {kind: study_table(study, kind) for kind in claim.tables}


def all_targets():
    tables = [f"{RESULTS}/tables/{k}.parquet" for k in ("runs", "interpolation", "barriers")]
    claims = [f"{RESULTS}/claims/{c}.json" for c in CLAIM_CFG]
    if claims:
        tables.append(f"{RESULTS}/tables/claims.parquet")
    return tables + figure_targets() + claims
