"""Typed result tables: one declared schema per Parquet table.

Every table row starts with the point columns (what was swept and how it was
trained), so a plain pandas or DuckDB filter answers a question without
joins. ``make_frame`` refuses columns that are not declared here, so the
schema in ``results/README.md`` is the schema on disk.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from lmcflow.config import Point
from lmcflow.config.catalog import check_symmetry
from lmcflow.io import read_parquet, write_parquet
from lmcflow.metrics import barriers

POINT_COLUMNS = [
    ("study", "string"), ("point", "string"), ("dataset", "string"), ("arch", "string"),
    ("width", "float64"), ("depth", "int64"), ("norm", "string"), ("activation", "string"),
    ("weight_decay", "float64"), ("optimizer", "string"), ("lr", "float64"), ("epochs", "int64"),
    ("batch_size", "int64"), ("symmetry", "string"), ("sigma_f", "float64"),
    # "real", or the null-partner kind of model B (lmcflow.config.partners): a row of pairs (real A, partner B)
    ("partner", "string"),
]

PAIR_COLUMNS = [("seed_a", "int64"), ("seed_b", "int64"), ("method", "string")]

TABLES: dict[str, list[tuple[str, str]]] = {
    "runs": POINT_COLUMNS + [
        ("seed", "int64"), ("n_params", "int64"),
        ("train_loss", "float64"), ("train_acc", "float64"), ("train_loss_late_drop", "float64"),
        ("val_loss", "float64"),
        ("val_acc", "float64"), ("test_loss", "float64"), ("test_acc", "float64"),
        ("wall_time_s", "float64"), ("train_seconds", "float64"), ("device", "string"),
        ("precision", "string"), ("checkpoint", "string"), ("checkpoint_sha256", "string"),
        ("slurm_job_id", "string"), ("bundle_id", "string"), ("cpu_kernels", "string"), ("cpu_capability", "string"),
        ("train_threads", "int64"), ("weight_norm", "float64"),
    ],
    "interpolation": POINT_COLUMNS + PAIR_COLUMNS + [
        ("repair", "bool"), ("lam", "float64"), ("split", "string"), ("loss", "float64"), ("acc", "float64"),
        ("error", "float64"), ("calibrated_loss", "float64"), ("beta", "float64"), ("logit_norm", "float64"),
    ],
    "barriers": POINT_COLUMNS + PAIR_COLUMNS + [
        ("repair", "bool"), ("split", "string"), ("metric", "string"), ("calibrated", "bool"),
        ("definition", "string"), ("value", "float64"),
    ],
    # one row per point × seed subset × N-way method × REPAIR × calibration (lmcflow.jobs.merge_many)
    "merge_many": POINT_COLUMNS + [
        ("seeds", "string"), ("n_models", "int64"), ("method", "string"), ("repair", "bool"), ("calibrated", "bool"),
        *[(f"{who}_{split}_{metric}", "float64") for who in ("merged", "endpoint", "ensemble")
          for split in ("test", "train") for metric in ("loss", "error")],
        ("beta", "float64"), ("rounds", "int64"),
    ],
    "claims": [
        ("claim_id", "string"), ("paper", "string"), ("statement", "string"), ("study", "string"),
        ("verdict", "string"), ("reason", "string"), ("statistic_name", "string"), ("statistic", "float64"),
        ("ci_low", "float64"), ("ci_high", "float64"), ("ci_method", "string"), ("n_seeds", "int64"),
        ("n_pairs", "int64"), ("controls", "string"), ("paper_quantity", "string"), ("paper_value", "float64"),
        ("paper_scale", "string"), ("our_value", "float64"), ("paper_comparable", "string"), ("scale", "string"),
        ("endpoint_gate", "string"),
        ("convention_margin", "string"), ("null_controls", "string"), ("null_untrained", "float64"),
        ("null_shuffled_labels", "float64"), ("null_collapsed", "float64"),
        ("replicate_seeds", "string"), ("replicate_verdict", "string"), ("replicate_statistic", "float64"),
        ("replicate_ci_low", "float64"), ("replicate_ci_high", "float64"), ("replicated", "string"),
        ("regime", "string"), ("verdict_qualifier", "string"), ("paper_width", "float64"), ("our_widest", "float64"),
        ("crossing_width", "float64"), ("crossing_width_ci_low", "float64"), ("crossing_width_ci_high", "float64"),
    ],
}


def point_columns(point: Point) -> dict:
    m, t = point.model, point.train
    sym = m.get("symmetry") or {}
    # σ_F as the layers use it: the masked kinds default to lmcflow.symmetry's σ_F; standard and σ-asymmetric
    # layers have no fixed offsets.
    if sym.get("kind", "standard") not in ("w_asymmetric", "syre"):  # no fixed offsets F
        sigma_f = 0.0
    else:
        sigma_f = float(check_symmetry(sym)["sigma_f"])
    return {
        "study": point.study, "point": point.point, "dataset": point.dataset, "arch": m["arch"],
        "width": float(m["width"]), "depth": int(m.get("depth", 0)), "norm": m.get("norm", "none"),
        "activation": m.get("activation", "relu"), "weight_decay": float(t["weight_decay"]),
        "optimizer": t["optimizer"], "lr": float(t["lr"]), "epochs": int(t["epochs"]),
        "batch_size": int(t["batch_size"]), "symmetry": sym.get("kind", "standard"),
        "sigma_f": sigma_f, "partner": point.partner,
    }


def real_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of real pairs and models (``partner == "real"``), without a study's null-partner rows."""
    return df[df["partner"] == "real"] if "partner" in df.columns else df


# results/tables/<kind>.parquet holds what a reader queries first: real models and pairs, merges without REPAIR.
# The other rows are in results/tables/<part>/<kind>.parquet, where a query must name them (results/README.md).
RESULT_PARTS = ("null_partners", "repair")


def result_part(df: pd.DataFrame) -> pd.Series:
    """Per row of a result table, the part it belongs in: "real" (a real model or pair, no REPAIR),
    "null_partners" (its model B is a null partner, with or without REPAIR) or "repair" (a real pair, REPAIR'd)."""
    part = pd.Series("real", index=df.index, dtype=object)
    if "repair" in df.columns:
        part[df["repair"].astype(bool).to_numpy()] = "repair"
    if "partner" in df.columns:
        part[(df["partner"] != "real").to_numpy()] = "null_partners"
    return part


def read_results(results, kind: str, null_partners: bool = False, repair: bool = False) -> pd.DataFrame:
    """One result table as a run wrote it under ``results``: the real rows, plus the null partners' and the
    REPAIR'd rows when asked for (each only where the run has them). The one loader for code that reads the
    results folder; the ``partner`` and ``repair`` columns tell the rows apart."""
    root = Path(results) / "tables"
    paths = [root / f"{kind}.parquet"] + [root / part / f"{kind}.parquet" for part, wanted
                                          in zip(RESULT_PARTS, (null_partners, repair), strict=True) if wanted]
    frames = [read_parquet(p, kind) for p in paths if p == paths[0] or p.exists()]
    frames = [f for f in frames if len(f)] or frames[:1]
    return pd.concat(frames, ignore_index=True).astype({c: t for c, t in TABLES[kind]})


def make_frame(kind: str, rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    """The rows (dicts, or a frame: not copied row by row) as the declared columns of table ``kind``, typed."""
    cols = TABLES[kind]
    names = [c for c, _ in cols]
    if isinstance(rows, pd.DataFrame):
        df = rows.reset_index(drop=True) if len(rows.columns) else pd.DataFrame(columns=names)
    else:
        df = pd.DataFrame(rows, columns=None if rows else names)
    extra = set(df.columns) - set(names)
    if extra:
        raise ValueError(f"table {kind!r}: undeclared columns {sorted(extra)}; declare them in lmcflow.tables")
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise ValueError(f"table {kind!r}: missing columns {missing}")
    df = df[names]
    return df.astype({c: t for c, t in cols})


def write_table(path, kind: str, rows_or_df) -> pd.DataFrame:
    df = make_frame(kind, rows_or_df)
    write_parquet(path, df, kind)
    return df


def read_table(path, kind: str) -> pd.DataFrame:
    return _with_added_columns(read_parquet(path, kind), kind)


def concat_tables(paths, kind: str) -> pd.DataFrame:
    frames = [_with_added_columns(read_parquet(p, kind), kind) for p in paths]
    frames = [f for f in frames if len(f)]
    if not frames:
        return make_frame(kind, [])
    return pd.concat(frames, ignore_index=True).astype({c: t for c, t in TABLES[kind]})


# float columns added to a table after rows of it were written: an older row reads them as NaN (a claim that needs
# one says what to rerun), so adding a measurement does not invalidate every finished job
ADDED_COLUMNS = {"runs": ("weight_norm",), "coherence": ("baseline_mse",)}


def _with_added_columns(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    missing = [c for c in ADDED_COLUMNS.get(kind, ()) if c not in df.columns]
    return df.assign(**{c: float("nan") for c in missing}) if missing else df


def plain_merges(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of an ``interpolation`` or ``barriers`` table without REPAIR (``repair`` false): what every
    reader but the REPAIR comparisons reads (a table without the column is returned as is)."""
    return df[~df["repair"].astype(bool)] if "repair" in df.columns else df


def barrier_rows(interp: pd.DataFrame) -> list[dict]:
    """All barrier definitions for every pair × method × split, raw and calibrated.

    Metrics: ``loss`` (cross-entropy; calibrated = with the per-λ fitted β) and
    ``error`` (1 − accuracy; β > 0 never changes the argmax, so the calibrated
    error barrier equals the raw one and is listed for symmetry).
    """
    keys = [c for c, _ in POINT_COLUMNS] + [c for c, _ in PAIR_COLUMNS] + ["repair", "split"]
    rows = []
    for key, g in interp.groupby(keys, sort=True, dropna=False):
        base = dict(zip(keys, key, strict=True))
        lam = g["lam"].to_numpy()
        curves = {("loss", False): g["loss"], ("loss", True): g["calibrated_loss"],
                  ("error", False): g["error"], ("error", True): g["error"]}
        for (metric, calibrated), vals in curves.items():
            vals = vals.to_numpy(dtype=float)
            if np.all(np.isnan(vals)):
                continue
            for definition, value in barriers(lam, vals).items():
                rows.append({**base, "metric": metric, "calibrated": calibrated,
                             "definition": definition, "value": value})
    return rows


# --------------------------------------------------------------------------- reproducibility
# The only columns in which two runs of one config on one machine may differ: how long a job took
# and the scheduler's job id. Every other column, and every non-table artifact byte for byte, is a
# function of the config (results/README.md, "Reproducibility"). ``device`` and ``precision`` name the
# hardware and differ between machines only.
RUN_SPECIFIC_COLUMNS: dict[str, tuple[str, ...]] = {
    "runs": ("wall_time_s", "train_seconds", "slurm_job_id"),
    "alignment": ("align_seconds", "wall_time_s"),
}


# --------------------------------------------------------------------------- identifiability paper tables
# Point columns plus the symmetry details and the dataset's nominal geometry, then per-table columns.
IDENT_POINT_COLUMNS = POINT_COLUMNS + [
    ("mask_type", "string"), ("mask_density", "float64"), ("n_fixed", "string"), ("sigma_f_scale", "string"),
    ("mask_seed", "int64"), ("data_k", "int64"), ("data_d", "int64"), ("data_nu", "float64"),
]

TABLES.update({
    # one row per seed pair × hidden layer × feature point × similarity: activation-matching objective
    # (lmcflow.identifiability)
    "identifiability": IDENT_POINT_COLUMNS + PAIR_COLUMNS[:2] + [
        ("layer", "int64"), ("feature", "string"), ("similarity", "string"), ("n_units", "int64"),
        ("n_samples", "int64"), ("optimal", "float64"),
        ("identity", "float64"), ("random_mean", "float64"), ("random_std", "float64"),
        ("identity_gap", "float64"), ("identity_normalized", "float64"), ("identity_fraction", "float64"),
    ],
    # one row per seed pair × method × split: unaligned / aligned LMC on effective weights
    "identifiability_lmc": IDENT_POINT_COLUMNS + PAIR_COLUMNS + [
        ("split", "string"), ("matching_objective", "float64"),
        ("loss_a", "float64"), ("loss_b", "float64"), ("loss_mid", "float64"),
        ("acc_a", "float64"), ("acc_b", "float64"), ("acc_mid", "float64"), ("acc_min", "float64"),
        ("error_barrier_midpoint", "float64"), ("error_barrier_max_minus_mean", "float64"),
        ("error_barrier_entezari", "float64"), ("loss_barrier_midpoint", "float64"),
        ("loss_barrier_max_minus_mean", "float64"), ("loss_barrier_entezari", "float64"),
        ("relative_accuracy_barrier", "float64"),
    ],
    # one row per model (seed) × weight layer: realization / swap-cost summaries (closed form and ridge) and the
    # coherence and anisotropy of the layer's input subspace
    "swap_costs": IDENT_POINT_COLUMNS + [
        ("seed", "int64"), ("layer", "string"), ("fan_in", "int64"), ("k", "int64"), ("explained", "float64"),
        ("input_coherence", "float64"), ("input_coherence_min", "float64"), ("fixed_fraction", "float64"),
        ("mask_mean", "float64"), ("anisotropy_mean", "float64"), ("anisotropy_max", "float64"),
        ("anisotropy_bound", "float64"), ("n_units", "int64"),
        ("swap_median", "float64"), ("swap_mean", "float64"), ("swap_q10", "float64"),
        ("swap_frac_negative", "float64"), ("self_cost_mean", "float64"), ("swap_median_relative", "float64"),
        ("swap_q10_relative", "float64"), ("swap_frac_cheap", "float64"), ("frac_unrealizable", "float64"),
        ("ridge_beta", "float64"), ("ridge_steps", "int64"), ("self_cost_mean_ridge", "float64"),
        ("swap_median_ridge", "float64"), ("swap_q10_ridge", "float64"), ("swap_frac_negative_ridge", "float64"),
        ("swap_q10_relative_ridge", "float64"), ("ridge_closed_form_spearman", "float64"),
    ],
    # heatmap data: T_ij (and T^ridge_ij) of the leading analysis.heatmap_units units, one row per
    # (seed, layer, i, j)
    "swap_matrix": IDENT_POINT_COLUMNS + [
        ("seed", "int64"), ("layer", "string"), ("i", "int64"), ("j", "int64"), ("swap_cost", "float64"),
        ("swap_cost_ridge", "float64"),
    ],
    # one row per seed pair × method × split: subspace coherence of the inputs and the path's barriers
    "coherence": IDENT_POINT_COLUMNS + PAIR_COLUMNS + [
        ("split", "string"), ("embedding", "string"), ("d", "int64"), ("k", "int64"), ("nu", "float64"),
        ("nu_min", "float64"),
        ("explained", "float64"), ("loss_a", "float64"), ("loss_b", "float64"), ("loss_mid", "float64"),
        ("baseline_mse", "float64"), ("regression_midpoint_barrier", "float64"), ("loss_barrier_midpoint", "float64"),
    ],
})

IDENT_TABLE_KINDS = ("identifiability", "identifiability_lmc", "swap_costs", "swap_matrix", "coherence")


def ident_point_columns(point: Point, meta: dict | None = None) -> dict:
    """Point columns + symmetry details (empty / NaN for kinds without masks) + the dataset's nominal k, d, ν.

    ``meta`` is the prepared dataset's metadata: synthetic generators record ``k``, ``d``
    and (coherence) ``nu``; torchvision datasets give data_k = −1, data_d = prod(in_shape).
    """
    sym = check_symmetry(point.model.get("symmetry"))
    masked = sym["kind"] in ("w_asymmetric", "syre")
    meta = meta or {}
    d = meta.get("d", math.prod(meta["in_shape"]) if meta.get("in_shape") else -1)
    return {
        **point_columns(point),
        "mask_type": sym["mask_type"] if sym["kind"] == "w_asymmetric" else "",
        "mask_density": float(sym["mask_density"]) if sym["kind"] == "w_asymmetric" and
        sym["mask_type"] == "bernoulli" else float("nan"),
        "n_fixed": json.dumps(sym["n_fixed"]) if sym["kind"] == "w_asymmetric" and
        sym["mask_type"] == "fixed_count" else "",
        "sigma_f_scale": json.dumps(sym["sigma_f_scale"]) if masked else "",
        "mask_seed": int(sym["mask_seed"]),
        "data_k": int(meta.get("k", -1)), "data_d": int(d),
        "data_nu": float(meta.get("nu", float("nan"))),
    }


# --------------------------------------------------------------------------- alignment and mechanism tables
TABLES.update({
    # one row per seed pair × alignment method (rule align); identity needs no alignment job
    "alignment": POINT_COLUMNS + PAIR_COLUMNS + [
        ("objective", "float64"), ("objective_identity", "float64"), ("iterations", "int64"),
        ("align_seconds", "float64"), ("wall_time_s", "float64"), ("n_groups", "int64"), ("n_units", "int64"),
        ("frac_unmoved", "float64"), ("n_samples", "int64"), ("dense_form", "bool"),
        ("permutation_file", "string"), ("permutation_sha256", "string"), ("device", "string"),
    ],
    # one row per seed pair × method × hidden layer × activity threshold τ (rule mechanism, beside layer_metrics;
    # lmcflow.mechanism.active_overlap_rows): the τ sweep of the active-unit overlap
    "active_overlap": POINT_COLUMNS + PAIR_COLUMNS + [
        ("layer", "int64"), ("active_threshold", "float64"), ("n_units", "int64"), ("n_active_a", "int64"),
        ("n_active_b", "int64"), ("frac_active_a", "float64"), ("frac_active_b", "float64"),
        ("active_jaccard", "float64"), ("active_jaccard_independent", "float64"), ("n_samples", "int64"),
    ],
    # one row per seed pair × method × hidden layer × λ (rule mechanism; lmcflow.mechanism.layer_metrics).
    # λ-independent metrics (reciprocal orthogonality, ranks, activity) repeat on every λ of a layer.
    "layer_metrics": POINT_COLUMNS + PAIR_COLUMNS + [
        ("layer", "int64"), ("lam_paper", "float64"), ("lam_path", "float64"),
        ("lewc_cos", "float64"), ("lewc_cos_shuffled", "float64"), ("llfc_cos", "float64"),
        ("lewc_cos_perturbed", "float64"),
        ("weak_additivity", "float64"), ("weak_additivity_shuffled", "float64"), ("weak_additivity_lewc", "float64"),
        ("weak_additivity_gaussian", "float64"), ("weak_additivity_lewc_gaussian", "float64"),
        ("weak_additivity_reference", "float64"),
        ("cross_ratio_a", "float64"), ("cross_ratio_b", "float64"), ("cross_cos", "float64"),
        ("cross_transform_cos", "float64"),
        ("cross_ratio_permuted_a", "float64"), ("cross_ratio_permuted_b", "float64"),
        ("cross_transform_cos_permuted_a", "float64"), ("cross_transform_cos_permuted_b", "float64"),
        ("own_norm_ratio", "float64"), ("own_input_cos_a", "float64"), ("own_input_cos_b", "float64"),
        ("weight_key", "string"), ("min_dim", "int64"),
        ("rank99_a", "int64"), ("rank99_b", "int64"), ("rank99_frac_a", "float64"), ("rank99_frac_b", "float64"),
        ("erank_a", "float64"), ("erank_b", "float64"), ("erank_rel_a", "float64"), ("erank_rel_b", "float64"),
        ("erank_rel_random", "float64"), ("rank99_frac_random", "float64"),
        ("n_units", "int64"), ("n_active_a", "int64"), ("n_active_b", "int64"),
        ("frac_active_a", "float64"), ("frac_active_b", "float64"), ("active_jaccard", "float64"),
        ("active_jaccard_independent", "float64"),
        ("m2_mean_a", "float64"), ("m2_mean_b", "float64"), ("m2_max_a", "float64"), ("m2_max_b", "float64"),
        ("active_threshold", "float64"), ("energy", "float64"), ("n_samples", "int64"), ("dense_form", "bool"),
    ],
})


# --------------------------------------------------------------------------- the width paper's Table 1 beside ours
TABLES.update({
    # one row per width study × weight-decay arm × merge method (identity, weight_matching) at the arm's widest
    # width: our midpoint test error barrier with its seed-level CI and the paper's Table-1 value beside it
    "paper_table1": [
        ("study", "string"), ("dataset", "string"), ("arch", "string"), ("bias", "bool"), ("width", "float64"),
        ("weight_decay", "float64"), ("method", "string"), ("barrier", "float64"), ("ci_low", "float64"),
        ("ci_high", "float64"), ("ci_method", "string"), ("n_seeds", "int64"), ("n_pairs", "int64"),
        ("paper_value", "float64"), ("paper_row", "string"), ("paper_width", "float64"),
        ("reference_value", "float64"), ("reference", "string"),
    ],
})

# the kinds whose rows may be REPAIR'd merges (a ``repair`` column)
REPAIR_KINDS = tuple(kind for kind, cols in TABLES.items() if "repair" in {c for c, _ in cols})
