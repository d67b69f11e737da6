"""Every code block in README.md, results/README.md and docs/ that reads a run's results runs here against a real
tiny run's outputs (tests/configs/docs_run.yaml: real pairs, an untrained null partner, REPAIR'd merges), and
what it computes is checked for sense: real pairs' barriers are not below −TOLERANCE, trained models' accuracies
are above chance, a query that asks for null partners gets them and only them."""
from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from lmcflow.tables import read_results, read_table
from tests.conftest import REPO, run_snakemake

pytestmark = [pytest.mark.slow, pytest.mark.fmnist]
DOCS = [REPO / "README.md", REPO / "results/README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(python|sql)\n(.*?)```", re.S)
# A real pair's barrier is ≥ 0 up to evaluation noise on 1000-2000 examples (one or two examples of error).
TOLERANCE = 0.01
CHANCE = 0.1  # Fashion-MNIST's ten balanced classes


def result_blocks() -> list[tuple[str, str, str]]:
    """(where, language, code) of every block that reads results (names a results table or the loader)."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in BLOCK.finditer(text):
            lang, code = m.groups()
            if "results/tables" in code or "read_results(" in code:
                line = text[: m.start()].count("\n") + 1
                out.append((f"{doc.relative_to(REPO)}:{line}", lang, code))
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run's results tables (with their null-partner and REPAIR parts), all the docs' blocks read; not its
    figures, paper table or provenance."""
    wd = tmp_path_factory.mktemp("docs_run")
    run_snakemake(REPO / "tests/configs/docs_run.yaml", wd,
                  *(f"results/tables/{kind}.parquet" for kind in ("runs", "interpolation", "barriers")))
    return wd


def frames_of(lang: str, code: str, wd: Path, monkeypatch) -> list[pd.DataFrame]:
    """The tables a block computes: a SQL block's result, or every DataFrame a Python block leaves in its names."""
    monkeypatch.chdir(wd)
    if lang == "sql":
        return [duckdb.sql(code).df()]
    names: dict = {}
    exec(compile(code, "<doc block>", "exec"), names)  # noqa: S102  (the docs' own code)
    return [v.reset_index() for v in names.values() if isinstance(v, pd.DataFrame)]


def checks(df: pd.DataFrame) -> list[str]:
    """Sense checks of one computed table; the names of those that applied. Fails where one does not hold."""
    done = []
    real = df[df["partner"] == "real"] if "partner" in df.columns else df
    for col in (c for c in df.columns if c.endswith("barrier") and not c.startswith("null_")):
        assert len(real) and (real[col] >= -TOLERANCE).all(), f"{col} of real pairs below −{TOLERANCE}:\n{df}"
        done.append(col)
    if "test_acc" in df.columns:
        trained = df[df["epochs"] > 0]
        assert len(trained) and (trained["test_acc"] > CHANCE + 0.1).all(), f"trained accuracy near chance:\n{df}"
        done.append("test_acc")
    for col in (c for c in df.columns if c.startswith("null_") and c.endswith("barrier")):
        assert set(df["partner"]) == {"untrained"}, df  # asked for null partners: those, and only those
        done.append(col)
    return done


def test_the_docs_hold_the_result_queries_this_test_runs():
    where = [w for w, _, _ in result_blocks()]
    assert len(where) >= 5 and any(w.startswith("README.md") for w in where), where


@pytest.mark.parametrize("block", result_blocks(), ids=lambda b: b[0])
def test_a_docs_query_gives_sensible_numbers(run, block, monkeypatch):
    where, lang, code = block
    frames = frames_of(lang, code, run, monkeypatch)
    done = [c for df in frames for c in checks(df)]
    assert done, f"{where}: no table this test knows how to check (name its columns as the others do)"


def test_real_tables_hold_only_real_plain_rows_and_the_loader_puts_the_parts_back(run):
    tables = run / "results/tables"
    for kind in ("runs", "interpolation", "barriers"):
        real = read_table(tables / f"{kind}.parquet", kind)
        assert len(real) and set(real["partner"]) == {"real"}
        if "repair" in real.columns:
            assert not real["repair"].any()
            repaired = read_table(tables / f"repair/{kind}.parquet", kind)
            assert len(repaired) and repaired["repair"].all() and set(repaired["partner"]) == {"real"}
        nulls = read_table(tables / f"null_partners/{kind}.parquet", kind)
        assert len(nulls) and set(nulls["partner"]) == {"untrained"}
        work = pd.concat([read_table(p, kind) for p in sorted((run / "work/tables").glob(f"*/{kind}.parquet"))])
        everything = read_results(run / "results", kind, null_partners=True, repair=True)
        assert len(everything) == len(work) and len(read_results(run / "results", kind)) == len(real)
