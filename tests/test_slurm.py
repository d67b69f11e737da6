"""The workflow on a live single-node SLURM cluster (profiles/slurm) vs. a local run.

Opt-in: needs root (or passwordless sudo), Debian packages slurmctld/slurmd/
slurm-client/munge (tests/slurm/start_cluster.sh installs them) and the tiny
config's dataset. Run with

    LMCFLOW_SLURM_TEST=1 .venv/bin/pytest -m slurm tests/test_slurm.py

The fixture starts the cluster with tests/slurm/start_cluster.sh (bounded) and
stops it afterwards unless it was already running. Every subprocess has a
timeout; a cluster that does not come up fails the test, it never hangs it.

Knobs: LMCFLOW_SLURM_START_TIMEOUT (s, default 240, includes apt-get install),
LMCFLOW_SLURM_RUN_TIMEOUT (s per snakemake run, default 900).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests/configs/tiny.yaml"
SLURM_DIR = REPO / "tests/slurm"
# Not resolved: the venv's bin/python is a symlink, and the venv is only "active"
# through its own path.
VENV_BIN = Path(sys.executable).parent
SNAKEMAKE = VENV_BIN / "snakemake"

START_TIMEOUT = int(os.environ.get("LMCFLOW_SLURM_START_TIMEOUT", "240"))
RUN_TIMEOUT = int(os.environ.get("LMCFLOW_SLURM_RUN_TIMEOUT", "900"))

# Columns that legitimately differ between a SLURM and a local run.
EXCLUDE = re.compile(
    r"wall|time|seconds|duration|elapsed|slurm|device|host|node|path|file|dir|"
    r"checkpoint|sha|hash|uuid|pid|date|started|finished|created",
    re.IGNORECASE,
)
RTOL, ATOL = 1e-6, 1e-9

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.fmnist,  # the tiny config trains on Debian's Fashion-MNIST (conftest skips)
    pytest.mark.skipif(
        os.environ.get("LMCFLOW_SLURM_TEST") != "1",
        reason="set LMCFLOW_SLURM_TEST=1 to run against a live SLURM cluster",
    ),
]


def _env() -> dict:
    env = os.environ.copy()
    # Jobs inherit the submitting environment (sbatch --export=ALL): the venv must be
    # first on PATH so that `python`/`snakemake` inside a job are the venv's.
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _script(name: str, timeout: int) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["bash", str(SLURM_DIR / name)], capture_output=True, text=True,
            timeout=timeout, env=_env(),
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(f"{name} did not finish within {timeout} s\n{out[-4000:]}\n{err[-4000:]}")


@pytest.fixture(scope="module")
def slurm_cluster():
    if not (REPO / "Snakefile").is_file() or not TINY.is_file():
        pytest.fail(f"workflow not found: {REPO / 'Snakefile'} / {TINY}")
    t0 = time.monotonic()
    res = _script("start_cluster.sh", START_TIMEOUT)
    out = res.stdout + res.stderr
    if res.returncode != 0:
        _script("stop_cluster.sh", 60)  # clean up whatever half-started
        pytest.fail(f"SLURM test cluster did not come up (rc={res.returncode}):\n{out[-6000:]}")
    started_here = "already running" not in out
    print(f"\nSLURM cluster ready in {time.monotonic() - t0:.1f} s")
    yield out
    if started_here:
        stop = _script("stop_cluster.sh", 60)
        assert stop.returncode == 0, stop.stdout + stop.stderr


def _run_snakemake(label: str, workdir: Path, *args: str) -> str:
    cmd = [str(SNAKEMAKE), "--snakefile", str(REPO / "Snakefile"), "--configfile", str(TINY),
           "--directory", str(workdir), *args]
    log = workdir.parent / f"{workdir.name}.snakemake.txt"
    t0 = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=_env(),
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            # SIGINT makes the slurm executor scancel its jobs before exiting
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
            rc = None
    out = log.read_text()
    print(f"{label} run: {time.monotonic() - t0:.1f} s")
    if rc != 0:
        msg = "timed out after %d s" % RUN_TIMEOUT if rc is None else f"exited {rc}"
        pytest.fail(f"snakemake {msg}: {' '.join(cmd)}\n{out[-6000:]}{_failed_slurm_logs(workdir)}")
    return out


def _failed_slurm_logs(workdir: Path) -> str:
    # The executor deletes the logs of successful jobs; what is left is from failures.
    logs = sorted((workdir / ".snakemake/slurm_logs").rglob("*.log"))
    return "".join(f"\n----- {p} -----\n{p.read_text()[-3000:]}" for p in logs[:5])


@pytest.fixture(scope="module")
def runs(slurm_cluster, tmp_path_factory):
    """The tiny workflow once through profiles/slurm and once through profiles/local."""
    base = tmp_path_factory.mktemp("slurm_vs_local")
    slurm_wd, local_wd = base / "slurm", base / "local"
    slurm_wd.mkdir()
    local_wd.mkdir()
    slurm_log = _run_snakemake(
        "slurm", slurm_wd, "--profile", str(REPO / "profiles/slurm"),
        # CI: poll squeue every 2 s after a job finishes (profile default: 5 s) and do
        # not hide failures behind the profile's retry.
        "--slurm-init-seconds-before-status-checks", "2", "--retries", "0",
    )
    local_log = _run_snakemake("local", local_wd, "--profile", str(REPO / "profiles/local"))
    return {"slurm": slurm_wd, "local": local_wd, "slurm_log": slurm_log, "local_log": local_log}


def _submitted(log: str) -> dict[str, str]:
    """snakemake job id -> SLURM job id, from the executor's submission messages."""
    return dict(re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log))


def test_every_nonlocal_job_ran_as_a_slurm_job(runs):
    log = runs["slurm_log"]
    nonlocal_jobs = re.findall(r"^rule (\w+):\s*$", log, re.MULTILINE)
    local_jobs = re.findall(r"^localrule (\w+):\s*$", log, re.MULTILINE)
    assert nonlocal_jobs, "no non-local jobs were scheduled"
    assert {"train", "interpolate"} <= set(nonlocal_jobs)
    assert not {"train", "interpolate"} & set(local_jobs)
    submitted = _submitted(log)
    assert len(submitted) == len(nonlocal_jobs), (len(submitted), nonlocal_jobs)

    # SLURM itself agrees: every job of this run (job name = the executor's run id)
    # is COMPLETED. MinJobAge=300 keeps finished jobs visible to squeue.
    run_id = re.search(r"SLURM run ID: (\S+)", log).group(1)
    sq = subprocess.run(["squeue", "-h", "--states=all", "--name", run_id, "-o", "%i|%T"],
                        capture_output=True, text=True, timeout=30, check=True)
    states = dict(line.split("|") for line in sq.stdout.split())
    assert set(states) == set(submitted.values())
    assert set(states.values()) == {"COMPLETED"}, states

    # Every training run recorded the SLURM job it ran in.
    table = pd.read_parquet(runs["slurm"] / "results/tables/runs.parquet")
    ids = table["slurm_job_id"]
    assert ids.notna().all() and ids.str.fullmatch(r"\d+(_\d+)?").all(), ids.tolist()
    assert set(ids) <= set(states), (set(ids), set(states))
    assert ids.nunique() == len(table)  # one training job per run


def test_local_run_has_no_slurm_job_ids(runs):
    if "SLURM_JOB_ID" in os.environ:
        pytest.skip("pytest itself runs inside a SLURM job")
    table = pd.read_parquet(runs["local"] / "results/tables/runs.parquet")
    assert table["slurm_job_id"].fillna("").eq("").all()
    assert not _submitted(runs["local_log"])


def _comparable(df: pd.DataFrame, workdir: Path) -> pd.DataFrame:
    keep = []
    for col in df.columns:
        s = df[col]
        if EXCLUDE.search(col) or pd.api.types.is_datetime64_any_dtype(s) \
                or pd.api.types.is_timedelta64_dtype(s):
            continue
        if not pd.api.types.is_numeric_dtype(s) and s.astype(str).str.contains(str(workdir), regex=False).any():
            continue  # an absolute path into this run's directory
        keep.append(col)
    out = df[keep]
    keys = [c for c in keep if not pd.api.types.is_float_dtype(out[c])]
    return out.sort_values(keys or keep, kind="stable").reset_index(drop=True)


def test_tables_equal_local_run(runs):
    local_tables = sorted(p.name for p in (runs["local"] / "results/tables").glob("*.parquet"))
    slurm_tables = sorted(p.name for p in (runs["slurm"] / "results/tables").glob("*.parquet"))
    assert local_tables and local_tables == slurm_tables
    assert "runs.parquet" in local_tables
    compared_numeric = 0
    for name in local_tables:
        a = _comparable(pd.read_parquet(runs["local"] / "results/tables" / name), runs["local"])
        b = _comparable(pd.read_parquet(runs["slurm"] / "results/tables" / name), runs["slurm"])
        assert list(a.columns) == list(b.columns), name
        assert len(a) == len(b) > 0, name
        for col in a.columns:
            x, y = a[col], b[col]
            if pd.api.types.is_float_dtype(x):
                xv, yv = x.to_numpy(float), y.to_numpy(float)
                ok = np.isclose(xv, yv, rtol=RTOL, atol=ATOL, equal_nan=True)
                assert ok.all(), (f"{name}:{col} differs (max |Δ| "
                                  f"{np.nanmax(np.abs(xv - yv)):.3g})\nlocal {xv[~ok][:5]}\nslurm {yv[~ok][:5]}")
                compared_numeric += 1
            else:
                assert x.astype(str).tolist() == y.astype(str).tolist(), f"{name}:{col} differs"
                compared_numeric += pd.api.types.is_numeric_dtype(x)
    assert compared_numeric > 0
