"""Typed result tables: one declared schema per Parquet table.

Every table row starts with the point columns (what was swept and how it was
trained), so a plain pandas or DuckDB filter answers a question without
joins. ``make_frame`` refuses columns that are not declared here, so the
schema in ``results/README.md`` is the schema on disk.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from lmcflow.config import Point
from lmcflow.io import read_parquet, write_parquet
from lmcflow.metrics import barriers

POINT_COLUMNS = [
    ("study", "string"), ("point", "string"), ("dataset", "string"), ("arch", "string"),
    ("width", "float64"), ("depth", "int64"), ("norm", "string"), ("activation", "string"),
    ("weight_decay", "float64"), ("optimizer", "string"), ("lr", "float64"), ("epochs", "int64"),
    ("batch_size", "int64"), ("symmetry", "string"), ("sigma_f", "float64"),
]

PAIR_COLUMNS = [("seed_a", "int64"), ("seed_b", "int64"), ("method", "string")]

TABLES: dict[str, list[tuple[str, str]]] = {
    "runs": POINT_COLUMNS + [
        ("seed", "int64"), ("n_params", "int64"),
        ("train_loss", "float64"), ("train_acc", "float64"), ("val_loss", "float64"),
        ("val_acc", "float64"), ("test_loss", "float64"), ("test_acc", "float64"),
        ("wall_time_s", "float64"), ("train_seconds", "float64"), ("device", "string"),
        ("precision", "string"), ("checkpoint", "string"), ("checkpoint_sha256", "string"),
        ("slurm_job_id", "string"),
    ],
    "interpolation": POINT_COLUMNS + PAIR_COLUMNS + [
        ("lam", "float64"), ("split", "string"), ("loss", "float64"), ("acc", "float64"),
        ("error", "float64"), ("calibrated_loss", "float64"), ("beta", "float64"),
    ],
    "barriers": POINT_COLUMNS + PAIR_COLUMNS + [
        ("split", "string"), ("metric", "string"), ("calibrated", "bool"),
        ("definition", "string"), ("value", "float64"),
    ],
    "claims": [
        ("claim_id", "string"), ("paper", "string"), ("statement", "string"), ("study", "string"),
        ("verdict", "string"), ("statistic_name", "string"), ("statistic", "float64"),
        ("ci_low", "float64"), ("ci_high", "float64"), ("n_pairs", "int64"), ("scale", "string"),
    ],
}


def point_columns(point: Point) -> dict:
    m, t = point.model, point.train
    sym = m.get("symmetry") or {}
    return {
        "study": point.study, "point": point.point, "dataset": point.dataset, "arch": m["arch"],
        "width": float(m["width"]), "depth": int(m.get("depth", 0)), "norm": m.get("norm", "none"),
        "activation": m.get("activation", "relu"), "weight_decay": float(t["weight_decay"]),
        "optimizer": t["optimizer"], "lr": float(t["lr"]), "epochs": int(t["epochs"]),
        "batch_size": int(t["batch_size"]), "symmetry": sym.get("kind", "standard"),
        "sigma_f": float(sym.get("sigma_f", 0.0) or 0.0),
    }


def register_table(kind: str, columns: list[tuple[str, str]]) -> None:
    """Declare a table (used by the alignment/identifiability modules for their tables)."""
    TABLES[kind] = columns


def make_frame(kind: str, rows: list[dict]) -> pd.DataFrame:
    cols = TABLES[kind]
    names = [c for c, _ in cols]
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
    rows = rows_or_df.to_dict("records") if isinstance(rows_or_df, pd.DataFrame) else rows_or_df
    df = make_frame(kind, rows)
    write_parquet(path, df, kind)
    return df


def read_table(path, kind: str) -> pd.DataFrame:
    return read_parquet(path, kind)


def concat_tables(paths, kind: str) -> pd.DataFrame:
    frames = [read_parquet(p, kind) for p in paths]
    frames = [f for f in frames if len(f)]
    if not frames:
        return make_frame(kind, [])
    return pd.concat(frames, ignore_index=True).astype({c: t for c, t in TABLES[kind]})


def barrier_rows(interp: pd.DataFrame) -> list[dict]:
    """All barrier definitions for every pair × method × split, raw and calibrated.

    Metrics: ``loss`` (cross-entropy; calibrated = with the per-λ fitted β) and
    ``error`` (1 − accuracy; β > 0 never changes the argmax, so the calibrated
    error barrier equals the raw one and is listed for symmetry).
    """
    keys = [c for c, _ in POINT_COLUMNS] + [c for c, _ in PAIR_COLUMNS] + ["split"]
    rows = []
    for key, g in interp.groupby(keys, sort=True, dropna=False):
        base = dict(zip(keys, key))
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

