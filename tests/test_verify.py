"""`lmcflow verify` on a small hand-built results folder: clean passes, each kind of damage is named."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmcflow.cli import main
from lmcflow.io import (
    CONTENT_SHA256_KEY,
    SCHEMA_VERSION_KEY,
    TABLE_SCHEMA_VERSION,
    json_content_sha256,
    sha256_file,
    table_content_sha256,
)
from lmcflow.tables import TABLES, write_table
from lmcflow.verify import verify

DEFAULTS = {"string": "x", "float64": 0.5, "int64": 1, "bool": False}


def row(kind: str, **values) -> dict:
    return {**{c: DEFAULTS[t] for c, t in TABLES[kind]}, **values}


def age(path, seconds: float) -> None:
    """Move a file's mtime ``seconds`` into the past."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


@pytest.fixture
def workdir(tmp_path):
    """A results folder as the workflow leaves it: tables, two checkpoints, one permutation file, one claim."""
    ckpts = []
    for seed in (0, 1):
        path = tmp_path / f"work/models/s/p/seed-{seed}.safetensors"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(range(256)) * (seed + 3))
        ckpts.append(path)
    perm = tmp_path / "work/align/s/p/weight_matching/pair-0-1.safetensors"
    perm.parent.mkdir(parents=True)
    perm.write_bytes(b"permutation" * 40)
    runs = [row("runs", seed=s, checkpoint=str(p.relative_to(tmp_path)), checkpoint_sha256=sha256_file(p))
            for s, p in enumerate(ckpts)]
    align = [row("alignment", method="weight_matching", permutation_file=str(perm.relative_to(tmp_path)),
                 permutation_sha256=sha256_file(perm))]
    barriers = [row("barriers", value=v) for v in (0.1, 0.2, 0.3)]
    for study_or_all in ("work/tables/s", "results/tables"):
        write_table(tmp_path / study_or_all / "runs.parquet", "runs", runs)
        write_table(tmp_path / study_or_all / "barriers.parquet", "barriers", barriers)
    write_table(tmp_path / "results/tables/alignment.parquet", "alignment", align)
    for path in tmp_path.rglob("*"):
        age(path, 60)  # the claim below is written a minute after its inputs
    claim = {"claim_id": "c", "verdict": "supported", "provenance": {"lmcflow_version": "0"},
             "tables_read": ["work/tables/s/barriers.parquet", "work/tables/s/runs.parquet"]}
    (tmp_path / "results/claims").mkdir()
    claim["content_sha256"] = json_content_sha256(claim)  # as the claim job writes it
    (tmp_path / "results/claims/c.json").write_text(json.dumps(claim))
    write_table(tmp_path / "results/tables/claims.parquet", "claims", [row("claims", claim_id="c")])
    return tmp_path


def problems(workdir) -> list[str]:
    return [str(p) for p in verify(workdir / "results").problems]


def test_clean_results_verify(workdir, capsys):
    result = verify(workdir / "results")
    assert result.ok, result.problems
    assert result.checked == {"tables": 6, "checkpoints": 2, "permutation files": 1, "claims": 1}
    assert main(["verify", str(workdir / "results")]) == 0
    assert capsys.readouterr().out.strip().startswith("lmcflow verify: 0 problems")


def test_truncated_checkpoint_is_named(workdir, capsys):
    ckpt = workdir / "work/models/s/p/seed-1.safetensors"
    ckpt.write_bytes(ckpt.read_bytes()[:100])
    [line] = problems(workdir)
    assert line.startswith("work/models/s/p/seed-1.safetensors: SHA-256 ") and line.endswith("[rule train]")
    assert "differs from the" in line and "recorded in results/tables/runs.parquet" in line and "100 bytes" in line
    assert main(["verify", str(workdir / "results")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == line and out[1].startswith("lmcflow verify: 1 problem in")
    # not a file of the embedded default config's run: verify says so rather than print a command for another run
    assert out[2] == ("Made by no job of the run of config/config.yaml (the embedded default) (give verify the "
                      "run's --configfile): work/models/s/p/seed-1.safetensors")


def test_deleted_permutation_file_is_named(workdir):
    (workdir / "work/align/s/p/weight_matching/pair-0-1.safetensors").unlink()
    assert problems(workdir) == [("work/align/s/p/weight_matching/pair-0-1.safetensors: missing (named in "
                                  "results/tables/alignment.parquet) [rule align]")]


def test_table_rewritten_by_pandas_is_named(workdir):
    path = workdir / "results/tables/barriers.parquet"
    df = pd.read_parquet(path)
    df.loc[0, "value"] = -1.0
    df.to_parquet(path)  # pandas keeps its own metadata only
    [line] = problems(workdir)
    assert line.startswith("results/tables/barriers.parquet: no lmcflow schema version")
    assert line.endswith("[rule result_table_barriers]")


def test_table_edited_with_metadata_kept_is_named(workdir):
    """An edit that keeps lmcflow's metadata changes the content hash; the claim reading it is now stale too."""
    path = workdir / "work/tables/s/barriers.parquet"
    table = pq.read_table(path)
    edited = table.set_column(table.column_names.index("value"), "value", pa.chunked_array([[0.1, 0.2, 9.9]]))
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), path)
    assert problems(workdir) == [
        ("work/tables/s/barriers.parquet: content differs from the hash recorded when the workflow wrote it "
         "(edited by hand?) [rule study_barriers]"),
        "results/claims/c.json: older than work/tables/s/barriers.parquet, which it reads [rule claim]"]


def test_old_schema_version_and_missing_content_hash_are_named(workdir):
    path = workdir / "results/tables/runs.parquet"
    table = pq.read_table(path)
    meta = {k: v for k, v in table.schema.metadata.items() if k != CONTENT_SHA256_KEY}
    pq.write_table(table.replace_schema_metadata({**meta, SCHEMA_VERSION_KEY: b"0"}), path)
    assert problems(workdir) == [
        (f"results/tables/runs.parquet: schema version 0, this lmcflow reads version {TABLE_SCHEMA_VERSION} "
         "[rule result_table_runs]"),
        ("results/tables/runs.parquet: no content hash: written by an older lmcflow, cannot be verified "
         "[rule result_table_runs]")]


def test_stale_claim_and_summary_are_named(workdir):
    age(workdir / "results/claims/c.json", 120)
    assert problems(workdir) == [
        "results/claims/c.json: older than work/tables/s/barriers.parquet, which it reads [rule claim]",
        "results/claims/c.json: older than work/tables/s/runs.parquet, which it reads [rule claim]"]
    age(workdir / "results/tables/claims.parquet", 600)
    assert problems(workdir)[-1] == ("results/tables/claims.parquet: older than results/claims/c.json, which it "
                                     "summarises [rule claims_table]")


def test_claim_without_provenance_and_missing_read_table(workdir):
    claim = workdir / "results/claims/c.json"
    data = json.loads(claim.read_text())
    del data["provenance"]
    data["tables_read"].append("work/tables/s/layer_metrics.parquet")
    claim.write_text(json.dumps(data))
    age(claim, 30)  # still newer than its tables, not newer than claims.parquet
    assert problems(workdir) == [
        "results/claims/c.json: records no provenance (written by an older lmcflow, or edited) [rule claim]",
        "results/claims/c.json: content differs from the hash recorded when the claim job wrote it (edited by hand?) "
        "[rule claim]",
        "work/tables/s/layer_metrics.parquet: missing (read by results/claims/c.json) [rule study_table_layer_metrics]",
        "results/claims/c.json: reads work/tables/s/layer_metrics.parquet, which is missing [rule claim]"]


def test_workdir_option_and_bad_folders(workdir, tmp_path_factory, capsys):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.rename(workdir / "results", elsewhere / "out")
    # the tables' paths are relative to the working directory, not to the results folder's new parent
    assert main(["verify", str(elsewhere / "out")]) == 1
    assert main(["verify", str(elsewhere / "out"), "--workdir", str(workdir)]) == 0
    assert main(["verify", str(workdir / "nope")]) == 2
    assert "no such results folder" in capsys.readouterr().err


def test_content_hash_ignores_encoding_and_sees_values(tmp_path):
    path = tmp_path / "t.parquet"
    write_table(path, "barriers", [row("barriers", value=v, method=m) for v, m in ((0.1, "a"), (float("nan"), "b"))])
    table = pq.read_table(path)
    recorded = table.schema.metadata[CONTENT_SHA256_KEY].decode()
    assert table_content_sha256(table) == recorded
    pq.write_table(table, tmp_path / "u.parquet", compression="zstd", row_group_size=1)  # same content, other bytes
    assert table_content_sha256(pq.read_table(tmp_path / "u.parquet")) == recorded
    renamed = table.rename_columns([*table.column_names[:-1], "val"])
    swapped = table.set_column(table.column_names.index("method"), "method", pa.chunked_array([["b", "a"]]))
    assert len({recorded, table_content_sha256(renamed), table_content_sha256(swapped)}) == 3


def test_verify_and_provenance_do_not_import_torch():
    code = ("import sys, lmcflow.verify, lmcflow.provenance, lmcflow.cli; "
            "assert 'torch' not in sys.modules, [m for m in sys.modules if m.startswith('torch')][:5]")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr[-2000:]


def test_a_published_folder_is_checked_without_its_models_and_file_times(workdir, capsys):
    """evidence/<run>/ ships tables and claims, not checkpoints, and git keeps no file times."""
    import shutil

    shutil.rmtree(workdir / "work/models")
    shutil.rmtree(workdir / "work/align")
    age(workdir / "results/claims/c.json", 120)  # older than the tables it read, as a checkout may leave it
    result = verify(workdir / "results", published=True)
    assert result.ok, result.problems
    assert result.checked == {"tables": 6, "claims": 1}
    assert main(["verify", str(workdir / "results"), "--published"]) == 0
    assert "as published: no checkpoints, permutation files or file times" in capsys.readouterr().out
    assert not verify(workdir / "results").ok  # the same folder as a run's results: its models are missing
    (workdir / "work/tables/s/barriers.parquet").unlink()  # a table a claim read is still checked
    assert [str(p) for p in verify(workdir / "results", published=True).problems] == [
        "work/tables/s/barriers.parquet: missing (read by results/claims/c.json) [rule study_barriers]",
        "results/claims/c.json: reads work/tables/s/barriers.parquet, which is missing [rule claim]"]


def test_edited_claim_is_named_by_its_content_hash(workdir):
    path = workdir / "results/claims/c.json"
    st = path.stat()
    claim = json.loads(path.read_text())
    assert problems(workdir) == []
    path.write_text(json.dumps({**claim, "verdict": "refuted"}))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert problems(workdir) == ["results/claims/c.json: content differs from the hash recorded when the claim job "
                                 "wrote it (edited by hand?) [rule claim]"]
    path.write_text(json.dumps({**claim, "tables_read": 7}))
    assert "results/claims/c.json: tables_read is not a list of table paths (7) [rule claim]" in problems(workdir)


def test_renamed_pandas_column_is_named(workdir):
    """The pandas metadata (what readers get as column names and dtypes) lies outside the content hash."""
    path = workdir / "results/tables/barriers.parquet"
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[b"pandas"] = meta[b"pandas"].replace(b'"value"', b'"valeu"')
    pq.write_table(table.replace_schema_metadata(meta), path)
    assert problems(workdir) == ["results/tables/barriers.parquet: its pandas metadata (column names and types as "
                                 "readers see them) differs from the hash recorded when the workflow wrote it "
                                 "[rule result_table_barriers]"]


def parquet_regions(data: bytes) -> list[tuple[str, int, int, int, int]]:
    """(name, start, end, stride, phase) of every structural region of a Parquet file, which together cover each
    of its bytes: the leading magic; each column chunk (page headers, dictionary, values); the footer's Thrift
    schema and column metadata; each key-value metadata entry's key (with its Thrift framing) and value (the
    Arrow schema, the pandas metadata, lmcflow's kind, schema version and hashes); the footer's tail (writer,
    column orders), its length and the closing magic."""
    n = len(data)
    footer = n - 8 - int.from_bytes(data[-8:-4], "little")
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    regions = [("magic", 0, 4, 1, 0)]
    for g in range(meta.num_row_groups):
        for j in range(meta.num_columns):
            col = meta.row_group(g).column(j)
            start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
            # the phase turns with the column: across 16 columns of a table every byte position of a column
            # chunk's layout is flipped in one of them
            regions.append((f"column {col.path_in_schema}", start, start + col.total_compressed_size, 16, j))
    entries = []
    for key, value in meta.metadata.items():
        at = data.index(key, footer)
        entries.append((at, key.decode(), data.index(value, at + len(key)), len(value)))
    end = min(at for at, *_ in entries)
    regions.append(("footer schema and column metadata", footer, end, 17, 0))
    for _, key, at, size in sorted(entries):
        regions.append((f"key {key}", end, at, 4, 0))
        end = at + size
        regions.append((f"value {key}", at, end, 96 if size > 256 else 8, 0))
    regions += [("footer tail", end, n - 8, 4, 0), ("footer length", n - 8, n - 4, 1, 0), ("magic", n - 4, n, 1, 0)]
    return regions


def flip_offsets(rel: str, data: bytes) -> list[int]:
    """A stratified sample of the offsets of ``data``: every structural region of the file (``parquet_regions``;
    a claim JSON and a checkpoint are one region each) gets its first and last byte and evenly spaced bytes
    between them, densest where the bytes are structure (magic, lengths, Thrift, keys, hashes), sparsest inside
    the long base64 Arrow schema and pandas JSON strings."""
    if rel.endswith(".parquet"):
        regions = parquet_regions(data)
    elif rel.endswith(".json"):  # a few hundred bytes, all structure: every third, as a reader parses each
        regions = [("claim", 0, len(data), 3, 0)]
    else:  # a file verify knows only by its SHA-256, which every byte changes alike
        regions = [("checkpoint", 0, len(data), 16, 0)]
    offsets = set()
    for _, start, end, stride, phase in regions:
        assert start < end, regions  # regions cover the file
        offsets |= {start, end - 1, *range(start + phase % stride, end, stride)}
    assert {o for _, s, e, *_ in regions for o in range(s, e)} == set(range(len(data)))
    return sorted(offsets)


def test_no_flipped_byte_makes_verify_raise(workdir):
    """Bytes of two tables, a checkpoint and the claim flipped in turn, in verify's own process: a problem naming
    the file, or none and the same content (tests/test_recovery.py does this on a real run).

    Which bytes: a stratified sample (``flip_offsets``), not every third byte. What verify does with a flipped
    byte depends on the structure the byte belongs to (a magic number, a page header, a dictionary or value,
    Thrift metadata, a metadata key, a hash, the base64 Arrow schema, the pandas JSON) and hardly on where it lies
    inside a run of like bytes; so every region of every file kind is flipped, at its ends and across it, about
    1,100 flips instead of 12,000, with the column chunks' byte positions all covered through a turning phase."""
    total = 0
    for rel in ("results/tables/barriers.parquet", "work/tables/s/runs.parquet", "results/claims/c.json",
                "work/models/s/p/seed-0.safetensors"):
        path = workdir / rel
        original, st = path.read_bytes(), path.stat()
        original_df = pq.read_table(pa.BufferReader(original)).to_pandas() if rel.endswith(".parquet") else None
        for offset in flip_offsets(rel, original):
            damaged = bytearray(original)
            damaged[offset] ^= 0xFF if offset % 2 else 0x01
            path.write_bytes(bytes(damaged))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            found = [p for p in verify(workdir / "results").problems if p.path == rel]
            if not found:
                assert rel.endswith(".parquet"), (rel, offset)  # JSON without a hash: no check of its values
                assert pq.read_table(path).to_pandas().equals(original_df)
            total += 1
        path.write_bytes(original)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert problems(workdir) == [] and total > 1000


def test_an_incomplete_run_lists_what_is_missing_and_the_command_that_makes_it(tmp_path, capsys):
    """A half-finished run is not "0 problems" and nothing more: verify lists the run's missing outputs and prints
    the command that makes them."""
    tiny = Path(__file__).resolve().parent / "configs/tiny.yaml"
    write_table(tmp_path / "results/tables/runs.parquet", "runs", [])
    assert main(["verify", str(tmp_path / "results"), "--configfile", str(tiny)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("lmcflow verify: 0 problems")
    assert out[1].startswith("Incomplete: ") and f"of the run of {tiny} missing:" in out[1]
    assert "  results/tables/interpolation.parquet" in out
    i = out.index("Make them with:")
    assert f"--directory {tmp_path}" in out[i + 1] and f"--configfile {tiny}" in out[i + 1]
    assert out[i + 1].endswith("--cores all")
