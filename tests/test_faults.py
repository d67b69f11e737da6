"""Fault injection: killed runs resume, corrupt files are named, divergence and bad configs fail clearly.

Each test records the faults it injected and how many the pipeline survived (a clear error or an
identical result); the counts are printed at the end of the test session.
"""
import copy
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmcflow.config import ConfigError

from .test_config import TINY, check

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
FAULTS_CFG = REPO / "tests/configs/faults.yaml"
FAULTS: dict[str, list[int]] = {}  # name -> [injected, survived]


def record(name, injected=1, survived=1):
    FAULTS.setdefault(name, [0, 0])
    FAULTS[name][0] += injected
    FAULTS[name][1] += survived


def smk_cmd(workdir, config=FAULTS_CFG, *args):
    return [SNAKEMAKE, "--snakefile", str(REPO / "Snakefile"), "--configfile", str(config),
            "--directory", str(workdir), "--cores", "2", *args]


def run(workdir, *args, config=FAULTS_CFG, check_rc=True, timeout=600):
    res = subprocess.run(smk_cmd(workdir, config, *args), capture_output=True, text=True, timeout=timeout)
    if check_rc:
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


STABLE_COLUMNS = ["wall_time_s", "train_seconds", "checkpoint"]


TABLES = ("runs", "interpolation", "barriers")
TARGETS = [f"results/tables/{k}.parquet" for k in TABLES]  # what the tests compare (no figures, no provenance)


def tables(workdir):
    return {k: pd.read_parquet(workdir / f"results/tables/{k}.parquet") for k in TABLES}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    wd = tmp_path_factory.mktemp("reference")
    run(wd, *TARGETS)
    return wd


def with_prepared_data(reference: Path, workdir: Path) -> Path:
    """``workdir`` holding the reference run's prepared dataset, with its file time: a test of what training does
    starts at training (every config here prepares the same subset, bit for bit)."""
    data = reference / "work/data/fmnist_faults.safetensors"
    (workdir / "work/data").mkdir(parents=True)
    shutil.copy2(data, workdir / "work/data" / data.name)
    return workdir


@pytest.mark.slow
@pytest.mark.fmnist
def test_killed_training_resumes_to_identical_tables(reference, tmp_path):
    with_prepared_data(reference, tmp_path)
    proc = subprocess.Popen(smk_cmd(tmp_path, FAULTS_CFG, *TARGETS), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    states = []
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            states = list((tmp_path / "work/state").rglob("*.state.safetensors"))
            if states:
                break
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the node dies: no cleanup of any kind
        proc.wait(timeout=60)
    assert states, "training never wrote a resumable state within 300 s"
    record("SIGKILL during training", survived=0)
    ckpts = list((tmp_path / "work/models").rglob("seed-*.safetensors"))
    assert all(".state." in p.name for p in ckpts) or len(ckpts) < 2  # no complete-looking half output
    run(tmp_path, "--unlock")
    run(tmp_path, "--rerun-incomplete", *TARGETS)
    logs = "".join(p.read_text() for p in (tmp_path / "logs/train").rglob("*.log"))
    assert "resumed from" in logs
    assert not list((tmp_path / "work/state").rglob("*.state.safetensors"))  # removed on completion
    got, ref = tables(tmp_path), tables(reference)
    for kind in got:
        a = got[kind].drop(columns=[c for c in STABLE_COLUMNS if c in got[kind]])
        b = ref[kind].drop(columns=[c for c in STABLE_COLUMNS if c in ref[kind]])
        pd.testing.assert_frame_equal(a, b)  # bit-identical: checkpoints hash equal, metrics equal
    FAULTS["SIGKILL during training"][1] += 1


@pytest.mark.slow
@pytest.mark.fmnist
def test_truncated_checkpoint_is_named(reference):
    ckpt = next((reference / "work/models").rglob("seed-0.safetensors"))
    data = ckpt.read_bytes()
    try:
        ckpt.write_bytes(data[: len(data) // 3])
        res = run(reference, "--forcerun", "interpolate", *TARGETS, check_rc=False)
        out = res.stdout + res.stderr + "".join(p.read_text() for p in (reference / "logs/merge").rglob("*.log"))
        assert res.returncode != 0
        assert str(ckpt.relative_to(reference)) in out and "rule train" in out and "corrupt or truncated" in out
        record("truncated checkpoint")
    finally:
        ckpt.write_bytes(data)


@pytest.mark.slow
@pytest.mark.fmnist
def test_divergence_fails_clearly_without_writing_a_model(reference, tmp_path):
    with_prepared_data(reference, tmp_path)
    cfg = yaml.safe_load(FAULTS_CFG.read_text())
    cfg["defaults"]["train"]["lr"] = 1e30  # NaN/inf loss within a few steps
    cfg["studies"]["faults"]["seeds"] = [0]
    path = tmp_path / "diverge.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = run(tmp_path, "work/models/faults/width-1/bundle-0", config=path, check_rc=False)
    log = (tmp_path / "logs/train/faults/width-1/bundle-0.log").read_text()
    assert res.returncode != 0
    assert re.search(r"training of faults/width-1 seed=0 diverged", log) and "epoch 1/4" in log and "lr=" in log
    assert not (tmp_path / "work/models/faults/width-1/bundle-0/seed-0.safetensors").exists()
    record("NaN loss")


# ---------------------------------------------------------------- malformed configs (hypothesis)
LEAVES = []


def _leaves(d, prefix=()):
    for k, v in d.items():
        if isinstance(v, dict) and v:
            _leaves(v, prefix + (k,))
        else:
            LEAVES.append(prefix + (k,))


_leaves(TINY)

WRONG = st.one_of(st.text(max_size=5), st.floats(allow_nan=True), st.integers(-10**6, -1),
                  st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                  st.none(), st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(LEAVES), value=WRONG)
def test_malformed_config_gives_a_config_error(path, value):
    cfg = copy.deepcopy(TINY)
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    try:
        check(cfg)
        ok = True  # the value happened to be valid (e.g. a string for a string key)
    except (jsonschema.ValidationError, ConfigError) as err:
        ok = True
        assert str(err)
    record("malformed config value", survived=int(ok))


def test_malformed_config_through_snakemake_has_no_traceback(tmp_path):
    """Snakemake reports a bad config file as "Invalid config: …", without a traceback. The Snakefile builds its
    plan (``Plan.from_files``) and turns a ``ConfigError`` from it, whatever its cause, into that message
    (workflow/rules/common.smk): the first bad value goes through Snakemake, each other one through the plan in
    this process, where anything but a ``ConfigError`` would be Snakemake's traceback."""
    from lmcflow.plan import Plan

    bad = [("defaults", "train", "epochs", "many"), ("studies", "width", "seeds", "0,1,2"),
           ("defaults", "merge", "lambdas", -3), ("device", None, None, "tpu")]
    for i, (a, b, c, value) in enumerate(bad):
        cfg = copy.deepcopy(TINY)
        if b is None:
            cfg[a] = value
        else:
            cfg[a][b][c] = value
        path = tmp_path / f"bad-{i}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        if i == 0:
            res = subprocess.run(smk_cmd(tmp_path, path, "-n"), capture_output=True, text=True, timeout=120)
            out = res.stdout + res.stderr
            assert res.returncode != 0 and "Traceback" not in out, out[-2000:]
            assert ("validation" in out.lower() or "Invalid config" in out), out[-2000:]
        else:
            with pytest.raises(ConfigError) as err:
                Plan.from_files([path])
            assert (c or a) in str(err.value), err.value  # the message names the key
        record("malformed config file via snakemake")
