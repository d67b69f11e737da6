"""The width paper's Table 1 beside ours: ``results/tables/paper_table1.parquet``.

Table 1 of Ito et al. (ICLR 2026) reports the midpoint (λ = ½) test error barrier e(½) − ½(e_A + e_B) at the
widest width the paper trained, for the plain average and with weight matching (``claims.width.TABLE1_ROWS``).
For every width study of a run (a study that sweeps ``model.width``) and each of its weight-decay arms, the
table holds our value of the same quantity at the arm's widest width, for each of the two methods evaluated
there, with its seed-level 95% interval (``claims.stats``: delete-one-seed jackknife over all seed pairs; no
interval below 4 seeds), and the paper's value beside it:

* ``paper_value`` — the Table-1 value where our row *is* a Table-1 row: same architecture and dataset, the
  paper's weight decay (3e-3) and a model with biases; NaN otherwise (our widest width may still differ from
  the paper's: compare ``width`` with ``paper_width``);
* ``reference_value``, ``paper_row``, ``reference`` — the Table-1 row shown beside ours: the exact row, or the
  nearest one (the row of the same architecture) with what differs, e.g. the CPU default's MLP on
  Fashion-MNIST at width 2 beside the paper's MLP on MNIST at 16×; empty for an architecture Table 1 lacks.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lmcflow.claims.core import pivot, select
from lmcflow.claims.stats import CI_METHOD, estimate
from lmcflow.claims.width import TABLE1_ROWS, Table1Row

TABLE1_WEIGHT_DECAY = 3.0e-3  # the paper's working value, at which Table 1 is reported
TABLE1_METHODS = ("identity", "weight_matching")


def reference_row(arch: str) -> Table1Row | None:
    """The Table-1 row of an architecture (Table 1 has one per architecture), or None."""
    return next((r for r in TABLE1_ROWS if r.arch == arch), None)


def describe_reference(ref: Table1Row | None, dataset: str, width: float, weight_decay: float, bias: bool) -> tuple:
    """(exact match?, the ``reference`` text) of our row against the Table-1 row ``ref``."""
    if ref is None:
        return False, "no Table-1 row for this architecture"
    differs = []
    if dataset != ref.dataset:
        differs.append(f"dataset {dataset} (paper: {ref.dataset})")
    if not math.isclose(weight_decay, TABLE1_WEIGHT_DECAY, rel_tol=1e-9):
        differs.append(f"weight decay {weight_decay:g} (paper: {TABLE1_WEIGHT_DECAY:g})")
    if not bias:
        differs.append("no biases (paper: with biases)")
    width_note = (f"our widest width {width:g}x, the paper's {ref.width:g}x" if not math.isclose(width, ref.width)
                  else f"both at {width:g}x")
    if not differs:
        return True, f"exact: Table-1 row {ref.label}; {width_note}"
    return False, f"nearest: Table-1 row {ref.label} (same architecture); differs in {', '.join(differs)}; {width_note}"


def table1_rows(barriers: pd.DataFrame, studies: dict) -> list[dict]:
    """Rows of ``paper_table1`` from the studies' ``barriers`` tables.

    ``studies``: {study: {"dataset": …, "arch": …, "bias": …}} of the width studies to tabulate, in order."""
    b = select(barriers, metric="error", calibrated=False, split="test", definition="midpoint")
    rows = []
    for study, info in studies.items():
        s = b[b.study == study]
        for wd in sorted(set(s.weight_decay), reverse=True):
            arm = s[np.isclose(s.weight_decay, wd)]
            width = float(arm.width.max())
            ref = reference_row(info["arch"])
            exact, text = describe_reference(ref, info["dataset"], width, float(wd), bool(info.get("bias", True)))
            for method in TABLE1_METHODS:
                at = arm[np.isclose(arm.width, width) & (arm.method == method)]
                if at.empty:
                    continue
                sample, _ = pivot(at, ["value"])
                est = estimate(lambda m: m["value"], sample)
                rows.append({
                    "study": study, "dataset": info["dataset"], "arch": info["arch"],
                    "bias": bool(info.get("bias", True)), "width": width, "weight_decay": float(wd), "method": method,
                    "barrier": est.value, "ci_low": est.ci_low, "ci_high": est.ci_high, "ci_method": CI_METHOD,
                    "n_seeds": sample.n_seeds, "n_pairs": sample.n_pairs,
                    "paper_value": ref.value(method) if exact else float("nan"),
                    "paper_row": ref.label if ref else "", "paper_width": ref.width if ref else float("nan"),
                    "reference_value": ref.value(method) if ref else float("nan"), "reference": text})
    return rows
