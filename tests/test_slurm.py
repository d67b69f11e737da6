"""The workflow on a live single-node SLURM cluster (profiles/slurm) vs. a local run.

Opt-in: needs root (or passwordless sudo), Debian packages slurmctld/slurmd/
slurm-client/munge (tests/slurm/start_cluster.sh installs them) and the tiny
config's dataset. Run with

    LMCFLOW_SLURM_TEST=1 .venv/bin/pytest -m slurm tests/test_slurm.py

The fixture starts the cluster with tests/slurm/start_cluster.sh (bounded) and
stops it afterwards unless it was already running. Every subprocess has a
timeout; a cluster that does not come up fails the test, it never hangs it.

Scale: every SLURM job pays ~20-25 s of wrapper start-up on a 2-CPU machine (the
executor runs a snakemake inside the job, which runs another one under srun, each
parsing the workflow) and the node has as many slots as the machine has cores,
and the executor's status polls back off (5, 20, 45, 80 s ... after a submission; the
SLURM runs here cap them at 2 s apart, tests/slurm/snakemake_prompt_status.py), so by
default both runs use a *trimmed* copy
of tests/configs/tiny.yaml: its first study with 3 seeds in bundles of 2 on a 12,000-image Fashion-MNIST subset, the
first value of every sweep key, the first merge method, no alignment/analysis blocks and no claims (5 SLURM jobs:
prepare_data, 2 x train, 2 x interpolate). Targets are the tables the SLURM jobs feed:
results/tables/{runs,interpolation,barriers}.parquet.
LMCFLOW_SLURM_TEST_FULL=1 runs tiny.yaml as it is, all targets (tens of minutes
on 2 CPUs).

test_maxtime_split_and_cancelled_training_resumes: a grid group of two points whose job would ask for more than
the partition's MaxTime is split in two (every request fits; sbatch would refuse one that did not), and a train
job cancelled (scancel) mid-training resumes from its last epoch state when the same command runs again: at
most one epoch is lost. Its working folder starts with the data the SLURM run of the other tests prepared (the
same data section), so its SLURM jobs are the train jobs it is about.

Knobs: LMCFLOW_SLURM_START_TIMEOUT (s, default 240, includes apt-get install),
LMCFLOW_SLURM_RUN_TIMEOUT (s per snakemake run, default 900),
LMCFLOW_SLURM_TEST_FULL (1: untrimmed tiny config, default target), LMCFLOW_SLURM_MAX_TIME (the partition's
MaxTime in minutes, default 10).

test_profiles_dry_run needs no cluster: it dry-runs the trimmed config through both
profiles, which fails on a profile key or value the installed snakemake/plugin do
not know, or on a trimmed config the workflow's validation rejects.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests/configs/tiny.yaml"
SLURM_DIR = REPO / "tests/slurm"
# Not resolved: the venv's bin/python is a symlink, and the venv is only "active"
# through its own path.
VENV_BIN = Path(sys.executable).parent
SNAKEMAKE = VENV_BIN / "snakemake"

START_TIMEOUT = int(os.environ.get("LMCFLOW_SLURM_START_TIMEOUT", "240"))
RUN_TIMEOUT = int(os.environ.get("LMCFLOW_SLURM_RUN_TIMEOUT", "900"))
FULL = os.environ.get("LMCFLOW_SLURM_TEST_FULL") == "1"
# the test partition's MaxTime (tests/slurm/start_cluster.sh); every run plans with cluster.max_runtime = it
MAX_TIME = int(os.environ.get("LMCFLOW_SLURM_MAX_TIME", "10"))
TABLES = ("runs", "interpolation", "barriers")
SUBSET = 12000  # training images of the trimmed config's dataset
# The executor polls squeue after init seconds, then 10 s later each time no job has finished (up to 180 s): with the
# profile's 5 s a chain of seconds-long jobs waits 15-25 s per link. 1 s (the plugin's least) only shortens those
# waits; every other option is the profile's.
FAST_POLL = ("--slurm-init-seconds-before-status-checks", "1")
# The SLURM runs' snakemake: the same, with the executor's checks at most 2 s apart instead of 10 s more after each
# check that saw no job finish (tests/slurm/snakemake_prompt_status.py): each job's end is seen within seconds.
SLURM_SNAKEMAKE = (sys.executable, str(SLURM_DIR / "snakemake_prompt_status.py"))

# Columns that legitimately differ between a SLURM and a local run. (String columns
# holding an absolute path into the run directory are dropped as well.) Everything
# else must match: floats to RTOL/ATOL, the rest exactly -- checkpoint_sha256
# included, i.e. the trained weights are bit-identical.
EXCLUDE = re.compile(
    r"wall|time|seconds|duration|elapsed|slurm|device|host|node|path|dir|"
    r"uuid|pid|date|started|finished|created",
    re.IGNORECASE,
)
RTOL, ATOL = 1e-6, 1e-9



def live_cluster(test):
    """Marks a test that needs the live SLURM test cluster (opt-in)."""
    for mark in (
        pytest.mark.slurm,
        pytest.mark.slow,
        pytest.mark.fmnist,  # the tiny config trains on Debian's Fashion-MNIST (conftest skips)
        pytest.mark.skipif(os.environ.get("LMCFLOW_SLURM_TEST") != "1",
                           reason="set LMCFLOW_SLURM_TEST=1 to run against a live SLURM cluster"),
    ):
        test = mark(test)
    return test


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
        errors = "\n".join(line for line in out.splitlines() if "ERROR" in line)
        pytest.fail(f"SLURM test cluster did not come up (rc={res.returncode}): {errors}\n"
                    f"--- start_cluster.sh output (tail) ---\n{out[-6000:]}")
    started_here = "already running" not in out
    print(f"\nSLURM cluster ready in {time.monotonic() - t0:.1f} s")
    yield out
    if started_here:
        stop = _script("stop_cluster.sh", 60)
        assert stop.returncode == 0, stop.stdout + stop.stderr


def trimmed_config(tiny: dict) -> dict:
    """The smallest config of the same shape with bundled jobs: one study, one point, 3 seeds in bundles of 2
    (train bundles {0, 1} and {2}; pair blocks 0-0 with pair (0, 1) and 0-1 with pairs (0, 2), (1, 2)), trained on
    a 12,000-image subset of the study's dataset (every SLURM job pays start-up, not arithmetic)."""
    cfg = {k: v for k, v in tiny.items() if k != "claims"}
    name, study = next(iter(tiny["studies"].items()))
    cfg["data"] = {**cfg["data"], "subsets": {"slurm_subset": {"base": study["dataset"], "n_train": SUBSET}}}
    study = dict(study, seeds=list(study["seeds"])[:3], dataset="slurm_subset")
    study["train"] = dict(study.get("train") or {}, bundle=2)
    sweep = study.get("sweep") or {}
    first_grid = sweep[0] if isinstance(sweep, list) else sweep
    study["sweep"] = {k: list(v)[:1] for k, v in first_grid.items()}
    study.pop("analysis", None)
    if study.get("merge"):
        merge = {k: v for k, v in study["merge"].items() if k != "alignment"}
        if merge.get("methods"):
            merge["methods"] = list(merge["methods"])[:1]
        study["merge"] = merge
    cfg["studies"] = {name: study}
    # requests estimated from the work (tiny.yaml's hand-set 10 min per model would ask a bundle for 20)
    cfg["defaults"] = {**cfg["defaults"],
                       **{b: {**cfg["defaults"][b], "resources": {"gpu": 0}} for b in ("train", "merge")}}
    cfg["cluster"] = {"max_runtime": MAX_TIME}
    return cfg


class _Run:
    """One snakemake process writing its output to <label>.snakemake.txt beside its working folder."""

    def __init__(self, label: str, workdir: Path, configfile: Path, targets: list[str], *args: str,
                 nice: int = 0, snakemake: tuple[str, ...] = (str(SNAKEMAKE),)):
        self.label, self.workdir = label, workdir
        self.cmd = [*snakemake, *targets, "--snakefile", str(REPO / "Snakefile"),
                    "--configfile", str(configfile), "--directory", str(workdir), *args]
        if nice:
            self.cmd = ["nice", "-n", str(nice), *self.cmd]
        self.seconds = None
        self.log = workdir.parent / f"{re.sub(r'[^a-z]+', '-', label).strip('-')}.snakemake.txt"  # one per run
        self.t0 = time.monotonic()
        with open(self.log, "w") as fh:
            self.proc = subprocess.Popen(self.cmd, stdout=fh, stderr=subprocess.STDOUT, env=_env(),
                                         start_new_session=True)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # the slurm executor scancels its jobs
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)

    def poll(self) -> bool:
        """True once the process has exited (and records its wall time)."""
        if self.proc.poll() is None:
            return False
        if self.seconds is None:
            self.seconds = time.monotonic() - self.t0
        return True

    def result(self) -> str:
        """The output of a finished run; fails the test if it did not succeed."""
        rc = self.proc.returncode if self.poll() else None
        if rc is None:
            self.stop()
        out = self.log.read_text()
        if self.seconds is not None:
            print(f"{self.label} run: {self.seconds:.1f} s")
        if rc != 0:
            msg = f"timed out after {RUN_TIMEOUT} s" if rc is None else f"exited {rc}"
            pytest.fail(f"{self.label} snakemake {msg}: {' '.join(self.cmd)}\n{out[-6000:]}"
                        f"{_failed_slurm_logs(self.workdir)}")
        return out


def _failed_slurm_logs(workdir: Path) -> str:
    # The executor deletes the logs of successful jobs; what is left is from failures.
    logs = sorted((workdir / ".snakemake/slurm_logs").rglob("*.log"))
    return "".join(f"\n----- {p} -----\n{p.read_text()[-3000:]}" for p in logs[:5])


@pytest.fixture(scope="module")
def runs(slurm_cluster, tmp_path_factory):
    """The same config once through profiles/slurm and once through profiles/local.

    The two runs go concurrently (the SLURM run leaves the CPUs idle between the
    executor's status polls); results do not depend on timing, threads are fixed per
    rule.
    """
    base = tmp_path_factory.mktemp("slurm_vs_local")
    configfile, targets = _write_config(base)
    wd = {k: base / k for k in ("slurm", "local")}
    for d in wd.values():
        d.mkdir()
    slurm = _Run("slurm", wd["slurm"], configfile, targets,
                 "--profile", str(REPO / "profiles/slurm"),
                 # no retries hiding failures; localrules on all cores
                 "--retries", "0", "--local-cores", str(os.cpu_count() or 1), *FAST_POLL,
                 snakemake=SLURM_SNAKEMAKE)
    # niced: the SLURM jobs get the CPUs when they need them, the local run fills the gaps
    local = _Run("local", wd["local"], configfile, targets, "--profile", str(REPO / "profiles/local"),
                 nice=19)
    deadline = time.monotonic() + RUN_TIMEOUT
    try:
        while time.monotonic() < deadline and not (slurm.poll() and local.poll()):
            if (slurm.poll() and slurm.proc.returncode) or (local.poll() and local.proc.returncode):
                break  # one failed: report it now
            time.sleep(1)
        # a finished (possibly failed) run reports first, then one that ran out of time
        logs = {r.label: r.result() for r in sorted((slurm, local), key=lambda r: not r.poll())}
    finally:
        slurm.stop()
        local.stop()
    return {**wd, "slurm_log": logs["slurm"], "local_log": logs["local"]}


def _write_config(base: Path) -> tuple[Path, list[str]]:
    """(configfile, targets) for both runs."""
    if FULL:
        return TINY, []
    configfile = base / "slurm_tiny.yaml"
    configfile.write_text(yaml.safe_dump(trimmed_config(yaml.safe_load(TINY.read_text()))))
    return configfile, [f"results/tables/{t}.parquet" for t in TABLES]


@pytest.mark.slow  # ~15 s: two workflow dry runs
def test_profiles_dry_run(tmp_path):
    pytest.importorskip("snakemake_executor_plugin_slurm")
    configfile, targets = _write_config(tmp_path)
    for profile in ("slurm", "local"):
        cmd = [str(SNAKEMAKE), *targets, "--snakefile", str(REPO / "Snakefile"),
               "--configfile", str(configfile), "--directory", str(tmp_path / profile),
               "--profile", str(REPO / "profiles" / profile), "--dry-run"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env())
        out = res.stdout + res.stderr
        assert res.returncode == 0, f"{' '.join(cmd)}\n{out[-4000:]}"
        assert f"Using profile {REPO / 'profiles' / profile}" in out
        jobs = re.findall(r"^(?:local)?rule (\w+):\s*$", out, re.MULTILINE)
        assert {"train", "interpolate"} <= set(jobs), jobs
        if not FULL:
            assert jobs.count("train") == 2 and jobs.count("interpolate") == 2, jobs


def _submitted(log: str) -> dict[str, str]:
    """snakemake job id -> SLURM job id, from the executor's submission messages."""
    return dict(re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log))


@live_cluster
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
    # is COMPLETED. The test cluster's MinJobAge (1 h) keeps finished jobs in squeue.
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
    # one training job per bundle: the models of a bundle share it
    assert ids.nunique() == nonlocal_jobs.count("train") == table["bundle_id"].nunique() == 2
    assert (table.groupby("bundle_id")["slurm_job_id"].nunique() == 1).all()


@live_cluster
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


@live_cluster
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


EPOCHS = 12  # ~0.2-1 s each on the subset: 9 epochs after epoch 3 to cancel both train jobs mid-training
POLL_S = 0.2  # the test's own polling: it cancels within a fraction of an epoch of seeing epoch 3


def resume_config(tiny: dict) -> dict:
    """Two points of one shape (one grid group without a limit), two seeds in one bundle, enough epochs to cancel
    a job mid-training; ``cluster.job_overhead_s`` set so that one point's train job fits MaxTime and the group's
    does not (halfway between their requests; a safety factor scaled up instead would scale the memory requests of
    these seconds-long jobs past the node's memory)."""
    from lmcflow.plan import Plan
    from lmcflow.plan.summary import planned_jobs

    cfg = trimmed_config(tiny)
    name, study = next(iter(cfg["studies"].items()))
    study["seeds"] = [0, 1]
    study["train"] = dict(study["train"], bundle=2, epochs=EPOCHS, batch_size=64, checkpoint_every=1)
    study["sweep"] = {"model.width": [1.0], "train.weight_decay": [3.0e-3, 1.0e-4]}
    cfg["studies"] = {name: study}
    alone = dict(cfg, studies={name: dict(study, train=dict(study["train"], bundle_grid=1))})
    single_s = max(j.request.seconds for j in planned_jobs(Plan(_resolved(alone))))
    together_s = max(j.request.seconds for j in planned_jobs(Plan(_resolved(cfg))))
    safety = 4.0
    cfg["cluster"] = {"max_runtime": MAX_TIME, "safety": safety,
                      "job_overhead_s": round(MAX_TIME * 60 - safety * (single_s + together_s) / 2)}
    return cfg


def _resolved(cfg: dict) -> dict:
    import tempfile

    from lmcflow.config import resolve_config

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(cfg, fh)
    return resolve_config([fh.name])


def _squeue(run_id: str, fmt: str) -> list[str]:
    sq = subprocess.run(["squeue", "-h", "--states=all", "--name", run_id, "-o", fmt], capture_output=True,
                        text=True, timeout=30, check=True)
    return sq.stdout.split()


@live_cluster
def test_maxtime_split_and_cancelled_training_resumes(runs, tmp_path):
    from lmcflow.plan import Plan
    from lmcflow.plan.summary import planned_jobs

    cfg = resume_config(yaml.safe_load(TINY.read_text()))
    configfile = tmp_path / "resume.yaml"
    configfile.write_text(yaml.safe_dump(cfg))
    workdir = tmp_path / "run"
    # the data the SLURM run of `runs` prepared (resume_config keeps trimmed_config's data section; file times
    # kept), so this test's SLURM jobs are its train jobs (LMCFLOW_SLURM_TEST_FULL: another file, prepared here)
    shutil.copytree(runs["slurm"] / "work/data", workdir / "work/data", ignore=shutil.ignore_patterns("raw"))
    args = ("--profile", str(REPO / "profiles/slurm"), "--retries", "0", *FAST_POLL)
    target = ["results/tables/runs.parquet"]
    first = _Run("slurm (cancelled)", workdir, configfile, target, *args, snakemake=SLURM_SNAKEMAKE)
    deadline = time.monotonic() + RUN_TIMEOUT
    epoch_re = re.compile(rf"\[bundle\] epoch (\d+)/{EPOCHS}")
    cancelled: set[Path] = set()
    try:
        # the plans, checked while the first run starts its SLURM jobs (seconds in which the test only waits)
        plan = Plan(_resolved(cfg))
        assert len(plan.grid.groups) == 2, plan.grid.groups  # the grid group of two points was split to fit MaxTime
        assert max(j.request.runtime for j in planned_jobs(plan)) <= MAX_TIME
        unsplit = Plan(_resolved({**cfg, "cluster": {**cfg["cluster"], "max_runtime": None}}))
        assert len(unsplit.grid.groups) == 1 and max(j.request.runtime for j in planned_jobs(unsplit)) > MAX_TIME
        while time.monotonic() < deadline and not first.poll() and len(cancelled) < 2:
            for log in sorted((workdir / "logs/train").rglob("bundle-*.log")):
                if log in cancelled or max(map(int, epoch_re.findall(log.read_text())), default=0) < 3:
                    continue
                run_id = re.search(r"SLURM run ID: (\S+)", first.log.read_text()).group(1)
                group = log.parent.name  # the train job's comment names its wildcards
                ids = [i for i, comment, state in (line.split("|") for line in _squeue(run_id, "%i|%k|%T"))
                       if state == "RUNNING" and comment.startswith("rule_train") and group in comment]
                if ids:  # SIGTERM now, SIGKILL after KillWait: the job dies mid-training
                    subprocess.run(["scancel", *ids], check=True, timeout=30)
                    cancelled.add(log)
            time.sleep(POLL_S)
        assert len(cancelled) == 2, f"not both train jobs were cancelled mid-training\n{first.log.read_text()[-4000:]}"
        first.proc.wait(timeout=RUN_TIMEOUT)
    finally:
        first.stop()
    assert first.proc.returncode != 0  # its train jobs were cancelled
    # the last epoch each job logged before it died, and where its log ends
    before = {log: (max(map(int, epoch_re.findall(log.read_text()))), log.read_text()) for log in cancelled}
    assert all(last < EPOCHS for last, _ in before.values()), {k: v[0] for k, v in before.items()}
    limits = _squeue(run_id, "%l")
    second = _Run("slurm (resumed)", workdir, configfile, target, *args, snakemake=SLURM_SNAKEMAKE)
    while time.monotonic() < deadline + RUN_TIMEOUT and not second.poll():
        time.sleep(POLL_S)
    second.result()
    for log, (last, old) in before.items():
        text = log.read_text()  # snakemake may start the rerun's log afresh
        resumed = text[len(old):] if text.startswith(old) else text
        starts = [int(e) for e in re.findall(r"\[bundle\] training 2 members from epoch (\d+)", resumed)]
        assert starts and last - 1 <= starts[0] <= last, (log, last, starts)  # at most one epoch lost
        assert f"epoch {EPOCHS}/{EPOCHS}" in resumed
    table = pd.read_parquet(workdir / "results/tables/runs.parquet")
    assert len(table) == 4 and (table["epochs"] == EPOCHS).all()
    # every job of both runs asked for at most the partition's MaxTime (sbatch refuses more)
    second_id = re.search(r"SLURM run ID: (\S+)", second.log.read_text()).group(1)
    for limit in limits + _squeue(second_id, "%l"):
        h, m, sec = (["0"] * 3 + re.split(r"[:-]", limit))[-3:]
        assert int(h) * 60 + int(m) + int(sec) / 60 <= MAX_TIME, limit
