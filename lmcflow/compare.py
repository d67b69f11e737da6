"""``lmcflow verify --against DIR``: does a results folder say what another one says?

Compares every file under two results folders (yours and, say, the committed evidence or a colleague's
run), without torch:

* each file (but Snakemake's ``report.html``): identical bits, or (tables) the same content in other
  bytes (``table_content_sha256`` equal), or different; files present on one side only are listed;
* a table that differs: its rows aligned by the table's key columns (point columns, seeds, pair,
  method, λ, split, ...), the largest absolute difference of each numeric column, and the number of
  rows in which each other column differs; rows whose key occurs on one side only are counted;
* every claim: its verdict on both sides (``claims/*.json``, else ``tables/claims.parquet``) and the
  difference of its statistic and interval.

The exit status is 0 only when every claim on either side has the same verdict on both; the last line
also says whether the bits agree.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lmcflow.inputs import results_folder
from lmcflow.io import TABLE_KIND_KEY, sha256_file, table_content_sha256
from lmcflow.tables import IDENT_POINT_COLUMNS, RUN_SPECIFIC_COLUMNS

PAIR = ["seed_a", "seed_b", "method"]
# Columns besides the point columns that name a row (its key), by table kind; the point columns of the
# identifiability tables (IDENT_POINT_COLUMNS) are found by name.
ROW_KEYS: dict[str, list[str]] = {
    "runs": ["seed"],
    "interpolation": PAIR + ["repair", "lam", "split"],
    "barriers": PAIR + ["repair", "split", "metric", "calibrated", "definition"],
    "alignment": PAIR,
    "layer_metrics": PAIR + ["layer", "lam_paper"],
    "active_overlap": PAIR + ["layer", "active_threshold"],
    "merge_many": ["seeds", "n_models", "method", "repair", "calibrated"],
    "identifiability": ["seed_a", "seed_b", "layer", "feature", "similarity"],
    "identifiability_lmc": PAIR + ["split"],
    "swap_costs": ["seed", "layer"],
    "swap_matrix": ["seed", "layer", "i", "j"],
    "coherence": PAIR + ["split", "embedding"],
    "claims": ["claim_id"],
    "paper_table1": ["study", "dataset", "arch", "bias", "width", "weight_decay", "method"],
}
CLAIM_NUMBERS = ("statistic", "ci_low", "ci_high")
# Not artifacts (results/README.md, "Reproducibility"): Snakemake's report embeds run times and its creation date.
NOT_COMPARED = ("report.html",)


@dataclass
class TableDiff:
    """How two versions of one table differ."""
    rows: tuple[int, int]
    max_abs: dict[str, tuple[float, str]] = field(default_factory=dict)  # numeric column -> largest
    # |mine - theirs| and the key of its row (the key columns that vary in the table)
    nan_mismatch: dict[str, int] = field(default_factory=dict)  # numeric column -> rows NaN on one side only
    differing: dict[str, int] = field(default_factory=dict)  # other column -> rows that differ
    unmatched: tuple[int, int] = (0, 0)  # rows whose key is on one side only
    columns_only: tuple[list, list] = ([], [])
    unaligned: str = ""  # why rows could not be aligned

    def changed_columns(self) -> set[str] | None:
        """The columns whose values differ, or None where more than values differ (rows, columns, alignment)."""
        if self.unaligned or any(self.unmatched) or any(self.columns_only) or self.rows[0] != self.rows[1]:
            return None
        return ({c for c, (v, _) in self.max_abs.items() if v > 0} | set(self.nan_mismatch) | set(self.differing))

    def lines(self) -> list[str]:
        out = [f"rows {self.rows[0]} | {self.rows[1]}"]
        if self.columns_only[0] or self.columns_only[1]:
            out.append(f"columns only in mine {self.columns_only[0]}, only in theirs {self.columns_only[1]}")
        if self.unaligned:
            return [*out, f"rows not aligned: {self.unaligned}"]
        if any(self.unmatched):
            out.append(f"rows whose key is only in mine: {self.unmatched[0]}, only in theirs: {self.unmatched[1]}")
        out += [f"{c}: max |Δ| {v:.3g}" + (f" at {at}" if at else "") for c, (v, at) in self.max_abs.items() if v > 0]
        out += [f"{c}: NaN on one side in {n} rows" for c, n in self.nan_mismatch.items()]
        out += [f"{c}: differs in {n} rows" for c, n in self.differing.items()]
        return out


@dataclass
class Comparison:
    mine: Path
    theirs: Path
    identical: list[str] = field(default_factory=list)
    same_content: list[str] = field(default_factory=list)
    timing_only: dict[str, list[str]] = field(default_factory=dict)  # table -> its timing columns that differ
    differs: dict[str, list[str]] = field(default_factory=dict)  # file -> how
    only_mine: list[str] = field(default_factory=list)
    only_theirs: list[str] = field(default_factory=list)
    verdicts: dict[str, tuple[dict | None, dict | None]] = field(default_factory=dict)  # claim -> mine, theirs

    @property
    def verdicts_agree(self) -> bool:
        return bool(self.verdicts) and all(a is not None and b is not None and a["verdict"] == b["verdict"]
                                           for a, b in self.verdicts.values())

    @property
    def bits_agree(self) -> bool:
        return not (self.same_content or self.timing_only or self.differs or self.only_mine or self.only_theirs)

    @property
    def content_agrees(self) -> bool:
        """Every file the same up to encoding and the columns that time a job (tables.RUN_SPECIFIC_COLUMNS)."""
        return not (self.differs or self.only_mine or self.only_theirs)

    def report(self) -> list[str]:
        lines = [f"lmcflow verify --against: {self.mine} (mine) vs {self.theirs} (theirs)",
                 f"identical bits: {len(self.identical)} files"]
        if self.same_content:
            lines.append(f"same content, other bytes: {', '.join(self.same_content)}")
        for name, cols in self.timing_only.items():
            lines.append(f"differs only in timing columns (not results): {name} ({', '.join(cols)})")
        for name, how in self.differs.items():
            lines.append(f"differs: {name}")
            lines += [f"    {h}" for h in how]
        lines += [f"only in mine: {name}" for name in self.only_mine]
        lines += [f"only in theirs: {name}" for name in self.only_theirs]
        for cid, (a, b) in sorted(self.verdicts.items()):
            lines.append(_claim_line(cid, a, b))
        agree = sum(a is not None and b is not None and a["verdict"] == b["verdict"] for a, b in self.verdicts.values())
        n_files = len(self.identical) + len(self.same_content) + len(self.timing_only) + len(self.differs) \
            + len(self.only_mine) + len(self.only_theirs)
        lacking = [f"{role} {root}" for role, root, i in (("mine", self.mine, 0), ("theirs", self.theirs, 1))
                   if not any(pair[i] is not None for pair in self.verdicts.values())]
        verdicts = (f"every verdict agrees ({agree} claims)" if self.verdicts_agree else
                    f"no claims in {' nor in '.join(lacking)} (tables/claims.parquet or claims/*.json): no verdicts "
                    "to compare" if lacking else
                    f"verdicts disagree ({agree} of {len(self.verdicts)} claims agree)")
        same = f"{len(self.identical)} of {n_files} files identical"
        bits = ("the bits agree" if self.bits_agree else
                f"the bits differ only in encoding or timing columns ({same})" if self.content_agrees else
                f"the bits differ ({same})")
        lines.append(f"lmcflow verify --against: {verdicts}; {bits}")
        return lines


def _claim_line(cid: str, a: dict | None, b: dict | None) -> str:
    va, vb = (x["verdict"] if x is not None else "(absent)" for x in (a, b))
    head = f"claim {cid:28s} {va:14s} | {vb:14s}"
    if a is None or b is None:
        return f"{head} only in {'mine' if b is None else 'theirs'}"
    deltas = []
    for k in CLAIM_NUMBERS:
        x, y = _num(a.get(k)), _num(b.get(k))
        if not (x == y or (math.isnan(x) and math.isnan(y))):
            deltas.append(f"{k} {_g(x)} | {_g(y)}")
    return f"{head} {'agrees' if va == vb else 'DISAGREES'}" + (f"; {', '.join(deltas)}" if deltas else
                                                                 "; same statistic and interval")


def _num(v) -> float:
    return float("nan") if v is None else float(v)


def _g(v: float) -> str:
    return "—" if math.isnan(v) else f"{v:.4g}"


def compare(mine: str | Path, theirs: str | Path) -> Comparison:
    mine, theirs = Path(mine), Path(theirs)
    results_folder(mine)
    results_folder(theirs, "--against")
    c = Comparison(mine, theirs)
    files_a, files_b = _files(mine), _files(theirs)
    c.only_mine = sorted(files_a - files_b)
    c.only_theirs = sorted(files_b - files_a)
    for name in sorted(files_a & files_b):
        a, b = mine / name, theirs / name
        if sha256_file(a) == sha256_file(b):
            c.identical.append(name)
        elif a.suffix == ".parquet":
            _compare_table(c, name, a, b)
        elif a.suffix == ".json":
            c.differs[name] = _json_diff(a, b)
        else:
            c.differs[name] = [f"{a.stat().st_size} | {b.stat().st_size} bytes"]
    va, vb = claim_verdicts(mine), claim_verdicts(theirs)
    c.verdicts = {cid: (va.get(cid), vb.get(cid)) for cid in sorted(va.keys() | vb.keys())}
    return c


def _files(root: Path) -> set[str]:
    # dot files are unfinished temporaries of atomic writes
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")}
    return files - set(NOT_COMPARED)


def _json_diff(a: Path, b: Path) -> list[str]:
    try:
        x, y = json.loads(a.read_text()), json.loads(b.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return [f"not readable JSON on both sides ({err})"]
    if not (isinstance(x, dict) and isinstance(y, dict)):
        return ["values differ"]
    keys = [k for k in sorted(x.keys() | y.keys()) if x.get(k) != y.get(k)]
    return [f"keys that differ: {', '.join(keys)}" if keys else "same values, other formatting"]


def claim_verdicts(results: Path) -> dict[str, dict]:
    """claim id -> {verdict, statistic, ci_low, ci_high}: from each claim JSON, else from claims.parquet."""
    out: dict[str, dict] = {}
    summary = results / "tables/claims.parquet"
    if summary.is_file():
        try:
            df = pq.read_table(str(summary), columns=["claim_id", "verdict", *CLAIM_NUMBERS]).to_pandas()
            out.update({r["claim_id"]: r for r in df.to_dict("records")})
        except (pa.ArrowException, OSError, ValueError, KeyError):
            pass  # reported as a differing or unreadable table; the JSONs may still say
    for path in sorted((results / "claims").glob("*.json")):
        try:
            claim = json.loads(path.read_text())
            out[claim["claim_id"]] = {k: claim.get(k) for k in ("verdict", *CLAIM_NUMBERS)}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            out[path.stem] = {"verdict": "(unreadable JSON)"}
    return out


def _compare_table(c: Comparison, name: str, a: Path, b: Path) -> None:
    try:
        ta, tb = pq.read_table(str(a)), pq.read_table(str(b))
    except (pa.ArrowException, OSError, ValueError) as err:
        c.differs[name] = [f"not a readable Parquet file on both sides ({err})"]
        return
    if table_content_sha256(ta) == table_content_sha256(tb):
        c.same_content.append(name)
        return
    kind = (ta.schema.metadata or {}).get(TABLE_KIND_KEY, a.stem.encode()).decode()
    diff = table_diff(ta.to_pandas(), tb.to_pandas(), kind)
    changed = diff.changed_columns()
    timing = RUN_SPECIFIC_COLUMNS.get(kind, ())
    if changed is not None and changed and changed <= set(timing):
        c.timing_only[name] = [col for col in timing if col in changed]
    else:
        c.differs[name] = diff.lines()


def row_key(df: pd.DataFrame, kind: str) -> list[str]:
    point = [col for col, _ in IDENT_POINT_COLUMNS if col in df.columns]  # the point columns and more
    extra = ROW_KEYS.get(kind)
    if extra is None:  # a table this lmcflow does not know: its non-float columns
        return [col for col in df.columns if not pd.api.types.is_float_dtype(df[col])]
    return list(dict.fromkeys(col for col in (*point, *extra) if col in df.columns))


def table_diff(a: pd.DataFrame, b: pd.DataFrame, kind: str) -> TableDiff:
    """Align the rows of two versions of a table by their key; per column, how far apart they are."""
    only = ([x for x in a.columns if x not in b.columns], [x for x in b.columns if x not in a.columns])
    d = TableDiff(rows=(len(a), len(b)), columns_only=only)
    key = [k for k in row_key(a, kind) if k in b.columns]
    if not key:
        d.unaligned = "no key columns"
        return d
    for side, df in (("mine", a), ("theirs", b)):
        dup = int(df.duplicated(key).sum())
        if dup:
            d.unaligned = f"{dup} rows of {side} repeat a key ({', '.join(key)})"
            return d
    m = a[key].merge(b[key], on=key, how="outer", indicator=True)  # the keys only: an outer merge turns a
    d.unmatched = (int((m["_merge"] == "left_only").sum()), int((m["_merge"] == "right_only").sum()))  # column
    m = a.merge(b, on=key, how="inner", suffixes=("\0a", "\0b"))  # with a missing row into floats; inner keeps types
    varying = [k for k in key if m[k].nunique(dropna=False) > 1]
    for col in (x for x in a.columns if x in b.columns and x not in key):
        x, y = m[f"{col}\0a"], m[f"{col}\0b"]
        numeric = all(pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v) for v in (x, y))
        if numeric and (pd.api.types.is_float_dtype(x) or pd.api.types.is_float_dtype(y)):
            xv, yv = x.to_numpy(float), y.to_numpy(float)
            nan_x, nan_y = np.isnan(xv), np.isnan(yv)
            both = ~nan_x & ~nan_y
            delta = np.where(both, np.abs(xv - yv), 0.0)
            worst = int(np.argmax(delta)) if len(delta) else 0
            at = ", ".join(f"{k}={m.at[worst, k]}" for k in varying) if len(delta) else ""
            d.max_abs[col] = (float(delta.max(initial=0.0)), at)
            if (nan_x != nan_y).any():
                d.nan_mismatch[col] = int((nan_x != nan_y).sum())
        else:  # integers as integers, strings and booleans as themselves (never their text: 6442 == 6442.0)
            same = (x.to_numpy(object) == y.to_numpy(object)) | (x.isna().to_numpy() & y.isna().to_numpy())
            n = int((~same).sum())
            if n:
                d.differing[col] = n
    return d
