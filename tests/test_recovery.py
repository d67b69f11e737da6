"""Recovery on a real damaged run (the session's ``small_run``: tests/configs/tiny.yaml cut down, two bundles of
three models, weight matching, a claim): `lmcflow verify` names every damaged file with its rule and never raises,
whatever byte is flipped; the command it prints rebuilds the damaged files, and deleting a damaged checkpoint and
rerunning snakemake rebuilds it, bit for bit, after which verify is clean. The rebuilds run Snakemake as a user
does; verify runs in this process (its command line, what a user reads)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from lmcflow.cli import main
from lmcflow.io import TABLE_KIND_KEY
from lmcflow.plan.ruletable import result_table_rule, study_table_rule
from lmcflow.tables import RUN_SPECIFIC_COLUMNS
from lmcflow.verify import verify
from tests.conftest import copy_run, run_snakemake

REPO = Path(__file__).resolve().parents[1]
CHECKPOINT = "work/models/width/width-1/bundle-0/seed-1.safetensors"
NARROW_CHECKPOINT = "work/models/width/width-0.25/bundle-0/seed-2.safetensors"
PERMUTATION = "work/align/width/width-1/weight_matching/blocks-0-0.safetensors"
CLAIM = "results/claims/width-merge-accuracy.json"

pytestmark = [pytest.mark.slow, pytest.mark.fmnist]


def artifacts(wd: Path) -> dict[str, bytes]:
    """Every checkpoint, permutation file, table and JSON of a run, by path."""
    return {str(p.relative_to(wd)): p.read_bytes() for top in ("work", "results") for p in (wd / top).rglob("*")
            if p.suffix in (".safetensors", ".parquet", ".json") and p.is_file() and "data" not in p.parts}


@pytest.fixture(scope="module")
def run(small_run, tmp_path_factory):
    """A copy of the session's small run and its artifacts; every test leaves it as verify-clean as it found it."""
    wd = copy_run(small_run, tmp_path_factory.mktemp("recovery") / "run")
    assert verify(wd / "results").ok
    return wd, artifacts(wd)


@pytest.fixture(scope="module")
def config(small_config_file):
    return small_config_file


def assert_rebuilt_identically(wd: Path, before: dict[str, bytes]) -> None:
    """The same files, byte for byte (tables with per-run timing columns: equal apart from those)."""
    after = artifacts(wd)
    assert sorted(after) == sorted(before)
    for f, data in before.items():
        if after[f] == data:
            continue
        assert f.endswith(".parquet"), f"{f}: rebuilt with other bytes"
        kind = pq.read_schema(io.BytesIO(data)).metadata[TABLE_KIND_KEY].decode()
        drop = list(RUN_SPECIFIC_COLUMNS.get(kind, ()))
        assert drop, f"{f}: a {kind!r} table rebuilt with other bytes"
        pd.testing.assert_frame_equal(pd.read_parquet(io.BytesIO(data)).drop(columns=drop),
                                      pd.read_parquet(wd / f).drop(columns=drop), obj=f)


def verify_cli(wd: Path, config: Path) -> tuple[int, str]:
    """``lmcflow verify results --configfile CONFIG`` in ``wd``: its exit status and what it prints."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.chdir(wd):
        status = main(["verify", "results", "--configfile", str(config)])
    return status, out.getvalue()


def expected_rule(path: str) -> str:
    p = Path(path)
    if path.startswith("results/tables/"):
        return result_table_rule(p.stem)
    if path.startswith("work/tables/"):
        return study_table_rule(p.stem)
    return {".safetensors": "align" if path.startswith("work/align") else "train", ".json": "claim"}[p.suffix]


def read_content(path: Path, data: bytes):
    """What a reader gets from a file holding ``data`` (``path`` names its kind)."""
    if path.suffix == ".json":
        return json.loads(data)
    if path.suffix == ".parquet":
        return pq.read_table(io.BytesIO(data)).to_pandas()
    return data


def same_content(path: Path, original) -> bool:
    """What a reader gets from the file equals ``original``, what it got from the undamaged file."""
    try:
        content = read_content(path, path.read_bytes())
        return content.equals(original) if path.suffix == ".parquet" else content == original
    except Exception:  # noqa: BLE001 -- unreadable is not the same content
        return False


def test_verify_reports_every_flipped_byte_and_never_raises(run):
    wd, before = run
    files = sorted(f for f in before if f.startswith("results/tables/"))
    files += json.loads(before[CLAIM])["tables_read"] + [CHECKPOINT, PERMUTATION, CLAIM]  # every table verify reads
    flips = 0
    for f in files:
        path, original = wd / f, before[f]
        original_content = read_content(path, original)  # read once: the flips below compare with it
        st = path.stat()
        n = len(original)
        hashed = f.endswith(".safetensors")  # any changed byte changes its SHA-256: a few offsets suffice
        offsets = sorted({0, n // 2, n - 1} if hashed else
                         {0, 3, 4, 101, 1750, n - 8, n - 5, n - 1, *range(0, n, max(1, n // 40))})
        for i, offset in enumerate(o for o in offsets if o < n):
            damaged = bytearray(original)
            damaged[offset] ^= 0x01 if i % 2 else 0xFF  # a near miss (a digit, a letter) and a far one
            path.write_bytes(bytes(damaged))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            flips += 1
            result = verify(wd / "results")  # an exception fails the test
            mine = [p for p in result.problems if p.path == f]
            if mine:
                assert all(p.rule == expected_rule(f) for p in mine), (f, offset, mine)
            else:
                assert result.ok and same_content(path, original_content), (f, offset, result.problems)
        path.write_bytes(original)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert verify(wd / "results").ok and flips > 400


def test_the_printed_command_rebuilds_every_damaged_file(run, config):
    """A truncated checkpoint inside a bundle, a byte flipped in a string column of a table (once an uncaught
    pyarrow error), a corrupt permutation file and a hand-edited claim: one printed command rebuilds them."""
    wd, before = run
    table = bytearray(before["results/tables/barriers.parquet"])
    table[101] ^= 0xFF
    permutation = bytearray(before[PERMUTATION])
    permutation[len(permutation) // 2] ^= 0x01
    claim = json.loads(before[CLAIM])
    claim["verdict"] = "supported" if claim["verdict"] != "supported" else "refuted"
    for f, data in ((CHECKPOINT, before[CHECKPOINT][: len(before[CHECKPOINT]) // 2]),
                    ("results/tables/barriers.parquet", bytes(table)), (PERMUTATION, bytes(permutation)),
                    (CLAIM, (json.dumps(claim, indent=2, sort_keys=True) + "\n").encode())):
        st = (wd / f).stat()
        (wd / f).write_bytes(data)
        os.utime(wd / f, ns=(st.st_atime_ns, st.st_mtime_ns))  # damage that leaves the file's time as it was

    status, out = verify_cli(wd, config)
    assert status == 1, out
    lines = out.splitlines()
    for f, rule in ((CHECKPOINT, "train"), ("results/tables/barriers.parquet", "result_table_barriers"),
                    (PERMUTATION, "align"), (CLAIM, "claim")):
        assert any(line.startswith(f"{f}: ") and line.endswith(f"[rule {rule}]") for line in lines), (f, lines)
    command = lines[lines.index(next(line for line in lines if line.startswith("Rebuild with"))) + 1].strip()
    forced = command.split("--forcerun ")[1].split()
    assert sorted(forced) == sorted(["work/models/width/width-1/bundle-0", "results/tables/barriers.parquet",
                                     PERMUTATION, CLAIM]), command  # the checkpoint's bundle: the train job's output
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                                         f"{os.environ['PATH']}"}
    done = subprocess.run(command, shell=True, cwd="/", capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert verify_cli(wd, config)[0] == 0
    assert_rebuilt_identically(wd, before)


def test_deleting_a_damaged_checkpoint_and_rerunning_snakemake_rebuilds_it(run, config):
    wd, before = run
    (wd / NARROW_CHECKPOINT).unlink()
    status, out = verify_cli(wd, config)
    assert status == 1 and out.startswith(f"{NARROW_CHECKPOINT}: missing"), out
    rerun = run_snakemake(config, wd)  # its log names each job it ran, as a dry run (-n) names each it would run
    trained = re.findall(r"rule train:\n(?:.*\n)*?\s+wildcards: (.*)", rerun)
    assert trained == ["study=width, group=width-0.25, block=0"], rerun[-2000:]
    assert verify_cli(wd, config)[0] == 0
    assert_rebuilt_identically(wd, before)
    assert "Nothing to be done" in run_snakemake(config, wd, "-n")
