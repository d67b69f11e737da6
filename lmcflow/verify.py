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
Each problem names the file, what is wrong and the rule that rebuilds it; ``repair_command`` is the one Snakemake
command that rebuilds every damaged file (``--forcerun`` of the output of the job that makes it: a checkpoint's
bundle directory, a table, a claim JSON) and what depends on it. Whatever a damaged file holds, verify reports
it and never raises (tests/test_recovery.py flips bytes all over the files it reads).
"""
from __future__ import annotations

import hashlib
import json
import logging
import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lmcflow.io import (
    CONTENT_SHA256_KEY,
    PANDAS_SHA256_KEY,
    SCHEMA_VERSION_KEY,
    TABLE_KIND_KEY,
    TABLE_SCHEMA_VERSION,
    json_content_sha256,
    sha256_file,
    table_content_sha256,
)
from lmcflow.plan import Plan, needed_jobs, producers
from lmcflow.plan.ruletable import result_table_rule, study_table_rule
from lmcflow.provenance import CHECKOUT
from lmcflow.tables import RESULT_PARTS

log = logging.getLogger(__name__)

CLAIM_SHA256_KEY = "content_sha256"  # of a claim JSON's other keys (lmcflow.io.json_content_sha256)

# (table, path column, hash column, rule that writes the file) of the files the tables vouch for
HASHED_FILES = [("runs", "checkpoint", "checkpoint_sha256", "train"),
                ("alignment", "permutation_file", "permutation_sha256", "align")]

# what a file that is not a readable, hash-matching table can raise on the way (pyarrow raises ArrowException and
# its subclasses, but also plain ValueError/OSError, UnicodeDecodeError in metadata or strings, IndexError/KeyError
# on a damaged schema): any of them is a problem with that file, never a crash of verify
DAMAGE = (pa.ArrowException, OSError, ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError,
          OverflowError, MemoryError, AttributeError, AssertionError, RuntimeError)


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
        return f"{head} (checked {what}{scope})"

    def rebuild_targets(self, configfiles=()) -> tuple[list[str], list[Problem]]:
        """The outputs to force so that every problem's file is made again (each the output of the job that
        writes the file: a checkpoint's bundle directory, a table, a claim), in the run of ``configfiles``
        (none: the embedded default); and the problems whose file no job of that run makes."""
        made = producers(needed_jobs(Plan.from_files(list(configfiles))))
        owner = {(self.workdir / out).resolve(): out for out in made}
        targets: dict[str, None] = {}
        unowned = []
        for problem in self.problems:
            path = (self.workdir / problem.path).resolve()
            found = next((owner[p] for p in (path, *path.parents) if p in owner), None)
            if found is None:
                unowned.append(problem)
            else:
                targets[found] = None
        return list(targets), unowned

    def missing_outputs(self, configfiles=()) -> tuple[list[str], str]:
        """The outputs of the run of ``configfiles`` (none: the embedded default) that do not exist, and why none
        are listed where this folder is not that run's (its ``paths.results`` elsewhere, its runs table holding
        studies the config does not have)."""
        plan = Plan.from_files(list(configfiles))
        if (self.workdir / plan.paths.results).resolve() != self.results.resolve():
            return [], f"the config's paths.results is {plan.paths.results}, not this folder"
        runs = self.results / "tables/runs.parquet"
        try:
            studies = set(pq.read_table(str(runs), columns=["study"]).column("study").to_pylist())
        except DAMAGE:  # missing or damaged: reported above, and no evidence of another config
            studies = set()
        # The runs table is written once every study has trained, so a run of this config holds all its studies:
        # a folder holding only some of them is another config's run, whose outputs are not this config's.
        if studies and studies != set(plan.grid.studies):
            extra, lacking = sorted(studies - set(plan.grid.studies)), sorted(set(plan.grid.studies) - studies)
            parts = (extra and f"has studies {', '.join(extra)} that the config has not",
                     lacking and f"lacks the config's studies {', '.join(lacking)}")
            differ = "; ".join(part for part in parts if part)
            return [], f"its runs table {differ}: give verify the run's --configfile"
        return [t for t in plan.targets.all_targets() if not (self.workdir / t).exists()], ""

    def make_command(self, configfiles=(), snakemake: str = "snakemake") -> str:
        """The command that makes what a run lacks, run from any directory."""
        cmd = [snakemake, "--snakefile", str(CHECKOUT / "Snakefile"), "--directory", str(self.workdir.resolve())]
        for f in configfiles:
            cmd += ["--configfile", str(Path(f).resolve())]
        return shlex.join([*cmd, "--cores", "all"])

    def repair_command(self, targets: list[str], configfiles=(), snakemake: str = "snakemake") -> str:
        """The one command that rebuilds ``targets`` (``rebuild_targets``) and what depends on them, bit for bit,
        in the run of ``configfiles``; it runs from any directory."""
        cmd = [snakemake, "--snakefile", str(CHECKOUT / "Snakefile"), "--directory", str(self.workdir.resolve())]
        for f in configfiles:
            cmd += ["--configfile", str(Path(f).resolve())]
        return shlex.join([*cmd, "--cores", "all", "--forcerun", *targets])


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
        self.workdir = v.workdir.resolve()

    def rel(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.workdir))
        except ValueError:
            return str(path)

    def resolve(self, recorded: str) -> Path:
        p = Path(recorded)
        return p if p.is_absolute() else self.v.workdir / p

    def problem(self, path: Path, what: str, rule: str) -> None:
        self.v.problems.append(Problem(self.rel(path), what, rule))

    def table_rule(self, path: Path) -> str:
        kind, parent = path.stem, path.resolve().parent
        tables = (self.v.results / "tables").resolve()
        if parent == tables or (parent.parent == tables and parent.name in RESULT_PARTS):
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
            self.table_content(path, rule)
        except DAMAGE as err:  # a damaged or non-Parquet file, whatever the damage breaks on the way
            self.problem(path, f"not a readable lmcflow table ({type(err).__name__}: {_short(err)})", rule)

    def table_content(self, path: Path, rule: str) -> None:
        table = pq.read_table(str(path))  # as readers get it: not ParquetFile.read, which takes other metadata
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
        pandas_sha = meta.get(PANDAS_SHA256_KEY)  # tables written before it was recorded carry none
        if pandas_sha is not None and hashlib.sha256(meta.get(b"pandas", b"")).hexdigest() != pandas_sha.decode():
            self.problem(path, "its pandas metadata (column names and types as readers see them) differs from the "
                               "hash recorded when the workflow wrote it", rule)
        # what every reader of the table does; in this thread: a pool costs more CPU than a few-row table's columns
        table.to_pandas(use_threads=False)

    def hashed_files(self, table_path: Path, kind: str, path_col: str, hash_col: str, rule: str) -> None:
        if not table_path.exists():
            self.problem(table_path, "missing", self.table_rule(table_path))
            return
        if any(p.path == self.rel(table_path) for p in self.v.problems):
            return  # a damaged table's paths and hashes are no record: its files are checked once it is rebuilt
        try:
            df = pq.read_table(str(table_path), columns=[path_col, hash_col]).to_pandas(use_threads=False)
            files = list(dict.fromkeys(zip(df[path_col], df[hash_col], strict=True)))
            paths = [self.resolve(recorded) for recorded, _ in files]
        except DAMAGE as err:
            self.problem(table_path, f"cannot read its {path_col!r} and {hash_col!r} columns "
                                     f"({type(err).__name__}: {_short(err)})", self.table_rule(table_path))
            return
        where = self.rel(table_path)
        # one file may serve several rows (a pair block's permutations): check each file once
        for path, (_, digest) in zip(paths, files, strict=True):
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
        missing = [k for k in ("tables_read", "provenance", CLAIM_SHA256_KEY) if k not in claim]
        if missing:
            self.problem(path, f"records no {' or '.join(missing)} (written by an older lmcflow, or edited)", "claim")
        recorded_sha = claim.get(CLAIM_SHA256_KEY)
        if recorded_sha is not None and recorded_sha != json_content_sha256(claim, CLAIM_SHA256_KEY):
            self.problem(path, "content differs from the hash recorded when the claim job wrote it (edited by hand?)",
                         "claim")
        read = claim.get("tables_read") or []
        if not (isinstance(read, list) and all(isinstance(t, str) and t and "\0" not in t for t in read)):
            self.problem(path, f"tables_read is not a list of table paths ({_short(read)})", "claim")
            return
        for recorded in read:
            table = self.resolve(recorded)
            self.table(table, reader=f" (read by {self.rel(path)})")
            if table.exists():
                self.newer(path, table, "claim", "which it reads")
            else:  # the table's own problem rebuilds it, this one the claim (its tables_read may be what is damaged)
                self.problem(path, f"reads {recorded}, which is missing", "claim")

    def newer(self, path: Path, than: Path, rule: str, relation: str) -> None:
        """``path`` must not be older than ``than``, an input of the job that wrote it."""
        if not self.v.published and path.stat().st_mtime_ns < than.stat().st_mtime_ns:
            self.problem(path, f"older than {self.rel(than)}, {relation}", rule)


def _short(value, limit: int = 160) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit] + "…"
