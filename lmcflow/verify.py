"""``lmcflow verify``: is a results folder what its tables say it is?

Checks, without torch and without Snakemake:

* every table under the results folder, and every table a claim read, is an lmcflow table of the
  current schema version whose content matches the hash recorded when the workflow wrote it
  (``lmcflow.io.table_content_sha256``: a table edited by hand, or rewritten by another tool, fails);
* every checkpoint in ``runs.parquet`` and every permutation file in ``alignment.parquet`` exists and
  hashes to the SHA-256 recorded there;
* every claim JSON is newer than each table it read (its ``tables_read``), ``claims.parquet`` is newer
  than every claim JSON, and ``provenance.json`` is newer than ``runs.parquet``.

Paths in tables and claim JSONs are relative to the workflow's working directory (where ``snakemake``
ran); by default that is the results folder's parent, as with the default ``paths.results: results``.
Each problem names the file, what is wrong and the rule that rebuilds it.
"""
from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lmcflow.io import (
    CONTENT_SHA256_KEY,
    SCHEMA_VERSION_KEY,
    TABLE_KIND_KEY,
    TABLE_SCHEMA_VERSION,
    sha256_file,
    table_content_sha256,
)
from lmcflow.plan.core import result_table_rule, study_table_rule

log = logging.getLogger(__name__)

# (table, path column, hash column, rule that writes the file) of the files the tables vouch for
HASHED_FILES = [("runs", "checkpoint", "checkpoint_sha256", "train"),
                ("alignment", "permutation_file", "permutation_sha256", "align")]

REBUILD_HINT = ("rebuild a listed file with `snakemake --cores all --forcerun FILE` from the working directory "
                "(with the run's --configfile); the jobs downstream of it rerun too")


@dataclass(frozen=True)
class Problem:
    path: str  # relative to the working directory when inside it
    what: str
    rule: str

    def __str__(self) -> str:
        return f"{self.path}: {self.what} [rule {self.rule}]"


@dataclass
class Verification:
    results: Path
    workdir: Path
    problems: list[Problem] = field(default_factory=list)
    checked: Counter = field(default_factory=Counter)
    published: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        # counted kinds are plurals ending in "s": tables, checkpoints, permutation files, claims
        what = ", ".join(f"{n} {kind if n != 1 else kind[:-1]}" for kind, n in self.checked.items()) or "nothing"
        head = f"lmcflow verify: {len(self.problems)} problem{'s' * (len(self.problems) != 1)} in {self.results}"
        scope = "; as published: no checkpoints, permutation files or file times" if self.published else ""
        return f"{head} (checked {what}{scope})" + ("" if self.ok else f"; {REBUILD_HINT}")


def verify(results: str | Path, workdir: str | Path | None = None, published: bool = False) -> Verification:
    """``published``: a results folder as published (``evidence/<run>/``): its tables, and those its claims read,
    checked as always; not its checkpoints and permutation files, which it does not ship, nor file times, which
    git does not keep."""
    results = Path(results)
    workdir = Path(workdir) if workdir is not None else results.resolve().parent
    v = Verification(results, workdir, published=published)
    checker = _Checker(v)
    for path in sorted(results.rglob("*.parquet")):
        checker.table(path)
    tables = results / "tables"
    for kind, path_col, hash_col, rule in [] if published else HASHED_FILES:
        table = tables / f"{kind}.parquet"
        if kind == "runs" or table.exists():  # every run has trained models; alignment is optional
            checker.hashed_files(table, kind, path_col, hash_col, rule)
    claim_files = sorted((results / "claims").glob("*.json"))
    for path in claim_files:
        checker.claim(path)
    summary = tables / "claims.parquet"
    if summary.exists():
        for path in claim_files:
            checker.newer(summary, path, "claims_table", "which it summarises")
    prov = results / "provenance.json"
    if prov.exists() and (tables / "runs.parquet").exists():
        checker.newer(prov, tables / "runs.parquet", "provenance", "which it describes")
    return v


class _Checker:
    def __init__(self, v: Verification):
        self.v = v
        self.tables_seen: set[Path] = set()

    def rel(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.v.workdir.resolve()))
        except ValueError:
            return str(path)

    def resolve(self, recorded: str) -> Path:
        p = Path(recorded)
        return p if p.is_absolute() else self.v.workdir / p

    def problem(self, path: Path, what: str, rule: str) -> None:
        self.v.problems.append(Problem(self.rel(path), what, rule))

    def table_rule(self, path: Path) -> str:
        kind = path.stem
        if path.resolve().parent == (self.v.results / "tables").resolve():
            return result_table_rule(kind)
        return study_table_rule(kind)

    def table(self, path: Path, reader: str = "") -> None:
        """Schema version, kind and content hash of one table (each table once)."""
        key = path.resolve()
        if key in self.tables_seen:
            return
        self.tables_seen.add(key)
        rule = self.table_rule(path)
        if not path.exists():
            self.problem(path, f"missing{reader}", rule)
            return
        self.v.checked["tables"] += 1
        try:
            table = pq.read_table(str(path))
        except (pa.ArrowException, OSError, ValueError) as err:  # a damaged or non-Parquet file
            self.problem(path, f"not a readable Parquet file ({err})", rule)
            return
        meta = table.schema.metadata or {}
        version = meta.get(SCHEMA_VERSION_KEY)
        if version is None:
            self.problem(path, "no lmcflow schema version: not written by the workflow (edited or rewritten by "
                               "another tool?)", rule)
            return
        if version.decode() != str(TABLE_SCHEMA_VERSION):
            self.problem(path, f"schema version {version.decode()}, this lmcflow reads version {TABLE_SCHEMA_VERSION}",
                         rule)
        kind = meta.get(TABLE_KIND_KEY, b"").decode()
        if kind != path.stem:
            self.problem(path, f"holds a {kind!r} table, its name says {path.stem!r}", rule)
        recorded = meta.get(CONTENT_SHA256_KEY)
        if recorded is None:
            self.problem(path, "no content hash: written by an older lmcflow, cannot be verified", rule)
        elif table_content_sha256(table) != recorded.decode():
            self.problem(path, "content differs from the hash recorded when the workflow wrote it (edited by hand?)",
                         rule)

    def hashed_files(self, table_path: Path, kind: str, path_col: str, hash_col: str, rule: str) -> None:
        if not table_path.exists():
            self.problem(table_path, "missing", self.table_rule(table_path))
            return
        try:
            df = pq.read_table(str(table_path), columns=[path_col, hash_col]).to_pandas()
        except (pa.ArrowException, OSError, ValueError, KeyError) as err:
            self.problem(table_path, f"cannot read its {path_col!r} and {hash_col!r} columns ({err})",
                         self.table_rule(table_path))
            return
        where = self.rel(table_path)
        # one file may serve several rows (a pair block's permutations): check each file once
        for recorded, digest in dict.fromkeys(zip(df[path_col], df[hash_col], strict=True)):
            path = self.resolve(recorded)
            self.v.checked[f"{path_col.replace('_', ' ')}s"] += 1
            if not path.is_file():
                self.problem(path, f"missing (named in {where})", rule)
                continue
            actual = sha256_file(path)
            if actual != digest:
                self.problem(path, f"SHA-256 {actual[:12]}… differs from the {str(digest)[:12]}… recorded in {where} "
                                   f"(corrupt, truncated or replaced; {path.stat().st_size} bytes)", rule)

    def claim(self, path: Path) -> None:
        self.v.checked["claims"] += 1
        try:
            claim = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            self.problem(path, f"not readable JSON ({err})", "claim")
            return
        if not isinstance(claim, dict):
            self.problem(path, f"not a claim (a JSON {type(claim).__name__}, not an object)", "claim")
            return
        missing = [k for k in ("tables_read", "provenance") if k not in claim]
        if missing:
            self.problem(path, f"records no {' or '.join(missing)} (written by an older lmcflow)", "claim")
        for recorded in claim.get("tables_read") or []:
            table = self.resolve(recorded)
            self.table(table, reader=f" (read by {self.rel(path)})")
            if table.exists():
                self.newer(path, table, "claim", "which it reads")

    def newer(self, path: Path, than: Path, rule: str, relation: str) -> None:
        """``path`` must not be older than ``than``, an input of the job that wrote it."""
        if not self.v.published and path.stat().st_mtime_ns < than.stat().st_mtime_ns:
            self.problem(path, f"older than {self.rel(than)}, {relation}", rule)
