"""End to end on a real run: its files are group-readable under umask 022, and `lmcflow verify --against`
tells a copy (same bits) from one whose table value, table encoding or claim verdict was rewritten through
lmcflow's own writers, and from a folder without claims."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lmcflow.cli import main
from lmcflow.io import write_json
from lmcflow.jobs.report import run_claims_table
from lmcflow.tables import read_table, write_table

pytestmark = [pytest.mark.slow, pytest.mark.fmnist]
CLAIM = "width-merge-accuracy"


@pytest.fixture(scope="module")
def run(small_run):
    """The session's run of the cut-down tiny config (``tests.conftest.small_config``, 32 jobs), made under umask
    022; read here, never changed."""
    return small_run


def copy(run: Path, dst: Path) -> Path:
    shutil.copytree(run / "results", dst)
    return dst


def against(mine: Path, theirs: Path, capsys) -> tuple[int, list[str]]:
    status = main(["verify", str(mine), "--against", str(theirs)])
    return status, capsys.readouterr().out.splitlines()


def test_run_files_are_group_readable(run):
    files = [p for top in ("results", "work") for p in (run / top).rglob("*") if p.is_file()]
    modes = {str(p.relative_to(run)): oct(p.stat().st_mode & 0o777) for p in files}
    assert len(modes) > 40 and {f: m for f, m in modes.items() if m != "0o644"} == {}


def test_a_copy_agrees_bit_for_bit(run, tmp_path, capsys):
    theirs = copy(run, tmp_path / "theirs")
    (theirs / "report.html").write_text("<html>run times, creation date</html>")  # Snakemake's: not compared
    status, out = against(run / "results", theirs, capsys)
    assert status == 0, out
    n = sum(1 for p in (run / "results").rglob("*") if p.is_file())
    assert out[1] == f"identical bits: {n} files"
    assert out[-2].startswith(f"claim {CLAIM}") and out[-2].endswith("agrees; same statistic and interval")
    assert out[-1] == "lmcflow verify --against: every verdict agrees (1 claims); the bits agree"


def test_same_content_in_other_bytes(run, tmp_path, capsys):
    theirs = copy(run, tmp_path / "theirs")
    table = pq.read_table(theirs / "tables/runs.parquet")
    pq.write_table(table, theirs / "tables/runs.parquet", compression="zstd")  # metadata kept, bytes not
    status, out = against(run / "results", theirs, capsys)
    assert status == 0 and "same content, other bytes: tables/runs.parquet" in out, out
    assert out[-1].startswith("lmcflow verify --against: every verdict agrees (1 claims); the bits differ only in "
                              "encoding or timing columns (")


def test_timing_only_differences_are_reported_apart(run, tmp_path, capsys):
    """Two runs of one config differ in how long their jobs took: reported apart from result differences."""
    theirs = copy(run, tmp_path / "theirs")
    runs = read_table(theirs / "tables/runs.parquet", "runs")
    runs["wall_time_s"] += 1.5
    write_table(theirs / "tables/runs.parquet", "runs", runs)
    status, out = against(run / "results", theirs, capsys)
    assert status == 0 and "differs only in timing columns (not results): tables/runs.parquet (wall_time_s)" in out
    assert not [x for x in out if x.startswith("differs:")], out
    assert "the bits differ only in encoding or timing columns" in out[-1]


def test_changed_value_and_verdict_are_named(run, tmp_path, capsys):
    theirs = copy(run, tmp_path / "theirs")
    barriers = read_table(theirs / "tables/barriers.parquet", "barriers")
    row = barriers.index[(barriers.method == "identity") & (barriers.definition == "midpoint")][0]
    barriers.loc[row, "value"] += 0.125
    write_table(theirs / "tables/barriers.parquet", "barriers", barriers.drop(index=barriers.index[-1]))
    claim_path = theirs / f"claims/{CLAIM}.json"
    claim = json.loads(claim_path.read_text())
    mine_verdict = claim["verdict"]
    claim.update(verdict="refuted" if mine_verdict != "refuted" else "supported", statistic=claim["statistic"] + 1)
    write_json(claim_path, claim)
    run_claims_table([claim_path], theirs / "tables/claims.parquet")

    status, out = against(run / "results", theirs, capsys)
    assert status == 1, out
    i = out.index("differs: tables/barriers.parquet")
    assert out[i + 1] == f"    rows {len(barriers)} | {len(barriers) - 1}"
    assert out[i + 2] == "    rows whose key is only in mine: 1, only in theirs: 0"
    b = barriers.loc[row]
    assert out[i + 3].startswith("    value: max |Δ| 0.125 at point=") and f"seed_a={b.seed_a}" in out[i + 3]
    assert f"differs: claims/{CLAIM}.json" in out and "differs: tables/claims.parquet" in out
    [line] = [x for x in out if x.startswith(f"claim {CLAIM}")]
    assert f" {mine_verdict} " in line and " DISAGREES; statistic " in line
    assert out[-1].startswith("lmcflow verify --against: verdicts disagree (0 of 1 claims agree); the bits differ")


def test_against_a_folder_without_claims(run, tmp_path, capsys):
    theirs = copy(run, tmp_path / "theirs")
    shutil.rmtree(theirs / "claims")
    (theirs / "tables/claims.parquet").unlink()
    status, out = against(run / "results", theirs, capsys)
    assert status == 1
    assert f"only in mine: claims/{CLAIM}.json" in out and "only in mine: tables/claims.parquet" in out
    assert any(x.startswith(f"claim {CLAIM}") and x.endswith("only in mine") for x in out)
    assert out[-1].startswith(f"lmcflow verify --against: no claims in theirs {theirs} (tables/claims.parquet or "
                              "claims/*.json): no verdicts to compare; the bits differ")


def test_every_table_kind_has_row_keys():
    from lmcflow.compare import ROW_KEYS
    from lmcflow.tables import TABLES

    assert sorted(set(TABLES) - set(ROW_KEYS)) == []
    for kind, keys in ROW_KEYS.items():
        assert set(keys) <= {c for c, _ in TABLES[kind]}, kind


def test_integers_are_compared_as_integers_and_rows_aligned_by_key():
    """A row only on one side must not turn the other rows' integers into floats compared as text (6442 vs
    6442.0), and a table with several rows per pair (active_overlap: layer × threshold) aligns them by its key."""
    import pandas as pd

    from lmcflow.compare import table_diff

    base = {"study": "s", "point": "p", "seed_a": 0, "seed_b": 1, "method": "identity", "n_units": 6442}
    a = pd.DataFrame([{**base, "layer": layer, "active_threshold": t, "active_jaccard": 0.5 + layer + t}
                      for layer in (1, 2) for t in (0.001, 0.01)])
    b = a.iloc[::-1].iloc[1:].reset_index(drop=True)  # other row order, one row fewer
    d = table_diff(a, b, "active_overlap")
    assert d.unmatched == (1, 0) and d.differing == {} and d.max_abs["active_jaccard"][0] == 0
    assert "n_units" not in d.differing
    b.loc[0, "n_units"] = 6443
    assert table_diff(a, b, "active_overlap").differing == {"n_units": 1}
    many = pd.DataFrame([{"study": "s", "seeds": "0,1,2", "n_models": 3, "method": m, "repair": r, "calibrated": c,
                          "merged_test_error": 0.1} for m in ("identity", "weight_matching") for r in (False, True)
                         for c in (False, True)])
    assert table_diff(many, many.sample(frac=1, random_state=0), "merge_many").changed_columns() == set()
