"""A check that crosses machines: ``cpu_kernels: portable`` gives the bits committed in
``tests/data/portable_hashes.json`` on every x86-64 machine with AVX2 (docs/reproducibility.md).

The config (tests/configs/portable.yaml) trains six MLPs on a Fashion-MNIST subset, aligns three
pairs by weight matching and interpolates; its checkpoints, permutation files and tables are hashed
(tables by content, without the columns that time a job; ``hashes``). The hashes were made with
``tests/data/make_portable_hashes.py``. On this machine a CPU without AVX-512 is emulated by the
variables that hold each library below AVX-512: portable runs must not see the difference, native
runs on an AVX-512 machine must.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from lmcflow import kernels
from lmcflow.io import sha256_file, table_content_sha256
from lmcflow.tables import RUN_SPECIFIC_COLUMNS
from tests.data.vendor_probe import first_difference

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "tests/configs/portable.yaml"
HASHES = REPO / "tests/data/portable_hashes.json"
NEUTRAL_HASHES = REPO / "tests/data/vendor_neutral_hashes.json"
NEUTRAL = ("--config", "cpu_kernels=vendor_neutral")
TABLES = ("runs", "alignment", "interpolation", "barriers")
TRAIN_ONLY = ("results/tables/runs.parquet",)
MODELS_ONLY = ("work/models/width/width-0.25/bundle-0", "work/models/width/width-1/bundle-0")
DATA = "work/data/fmnist_small.safetensors"
ALL_TARGETS = tuple(f"results/tables/{t}.parquet" for t in TABLES)
# An AVX2-only CPU as each library sees it (the variables portable mode sets, set from outside).
EMULATED_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
# What a user's shell might say; portable mode must override every one of them.
HOSTILE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
           "ONEDNN_MAX_CPU_ISA": "SSE41", "OPENBLAS_CORETYPE": "Prescott", "OMP_DYNAMIC": "TRUE"}

pytestmark = [pytest.mark.slow, pytest.mark.fmnist,
              pytest.mark.skipif(not kernels.is_x86_64(), reason="portable kernels are defined on x86-64")]


def outer_environment(outer_env: dict) -> dict:
    """This process's environment without any variable a kernel mode holds, with ``outer_env`` added."""
    held = {k for held_env in kernels.HELD_ENV.values() for k in held_env} | {kernels.MODE_VAR}
    return {**{k: v for k, v in os.environ.items() if k not in held}, **outer_env}


def run_workflow(workdir: Path, targets, outer_env: dict, *args: str) -> None:
    """The workflow on tests/configs/portable.yaml in ``workdir`` with ``outer_env`` added to this environment."""
    env = outer_environment(outer_env)
    # targets before args: --config takes all that follows it
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--snakefile", str(REPO / "Snakefile"),
           "--configfile", str(CONFIG), "--directory", str(workdir), "--cores", "2", *targets, *args]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]


def with_prepared_data(run: Path, workdir: Path) -> Path:
    """``workdir`` holding the prepared dataset of a full run (with its file time): the runs that compare only
    checkpoints start at training. The data is the same bits in every mode and environment (both committed
    records hold one hash for it), and the full run has checked it."""
    (workdir / DATA).parent.mkdir(parents=True)
    shutil.copy2(run / DATA, workdir / DATA)
    return workdir


def hashes(workdir: Path) -> dict[str, str]:
    """SHA-256 of every safetensors file under work/ (prepared data, checkpoints, permutation files),
    and the content hash of every table under results/tables without its run-specific columns."""
    out = {}
    for path in sorted((workdir / "work").rglob("*.safetensors")):
        if "state" not in path.relative_to(workdir).parts[:2]:  # resumable training states are not outputs
            out[str(path.relative_to(workdir))] = sha256_file(path)
    for path in sorted((workdir / "results/tables").glob("*.parquet")):
        df = pd.read_parquet(path).drop(columns=list(RUN_SPECIFIC_COLUMNS.get(path.stem, ())))
        out[str(path.relative_to(workdir))] = table_content_sha256(pa.Table.from_pandas(df, preserve_index=False))
    return out


def build_facts() -> dict:
    """What besides the kernels decides the bits: the torch, MKL and oneDNN builds."""
    from lmcflow.provenance import package_version

    build = kernels.torch_build()  # the +cpu and +cu130 wheels share their CPU math: the version without tag
    return {"torch_version": package_version("torch"), "mkl_version": build["mkl_version"],
            "onednn_version": build["onednn_version"]}


def committed() -> dict:
    """The committed hashes of this CPU's vendor: MKL dispatches its GEMM kernels by vendor too, so an AVX2 run
    on an AMD CPU gives other bits than on an Intel one (docs/reproducibility.md), and each vendor has its record."""
    data = json.loads(HASHES.read_text())
    if data["build"] != build_facts():
        pytest.skip(f"{HASHES.name} was made with {data['build']}, this is {build_facts()}: other libraries "
                    "give other bits; remake it with tests/data/make_portable_hashes.py")
    vendor = kernels.cpu_info()["vendor"]
    if vendor not in data["hashes_by_vendor"]:
        pytest.skip(f"{HASHES.name} holds no hashes for CPU vendor {vendor!r} (it has "
                    f"{sorted(data['hashes_by_vendor'])}); add them with tests/data/make_portable_hashes.py")
    return data["hashes_by_vendor"][vendor]


@pytest.fixture(scope="module")
def portable_run(tmp_path_factory) -> Path:
    """The portable run under a hostile environment (its data is what the checkpoint-only runs read)."""
    committed()  # skips, before the run, where there is no record to compare with
    workdir = tmp_path_factory.mktemp("portable")
    run_workflow(workdir, ALL_TARGETS, HOSTILE)
    return workdir


@pytest.fixture(scope="module")
def vendor_neutral_run(tmp_path_factory) -> Path:
    """The vendor_neutral run under a hostile environment."""
    committed_vendor_neutral()
    workdir = tmp_path_factory.mktemp("vendor_neutral")
    run_workflow(workdir, ALL_TARGETS, HOSTILE, *NEUTRAL)
    return workdir


def test_portable_run_matches_committed_hashes(portable_run):
    """Every output as committed, though the user's environment asks each library for other kernels."""
    expected = committed()
    got = hashes(portable_run)
    assert sorted(got) == sorted(expected)
    differ = [f for f in expected if got[f] != expected[f]]
    assert not differ, f"portable outputs differ from {HASHES.name}: {differ}"
    runs = pd.read_parquet(portable_run / "results/tables/runs.parquet")
    assert set(runs["cpu_kernels"]) == {"portable"} and set(runs["cpu_capability"]) == {"AVX2"}


def test_emulated_avx2_cpu_gives_the_committed_checkpoints(portable_run, tmp_path):
    expected = committed()
    run_workflow(with_prepared_data(portable_run, tmp_path), MODELS_ONLY, EMULATED_AVX2)
    got = hashes(tmp_path)
    models = [f for f in got if f.startswith("work/models/")]
    assert len(models) == 6
    assert {f: got[f] for f in models} == {f: expected[f] for f in models}


@pytest.mark.skipif("avx512f" not in kernels.cpu_info()["simd"], reason="needs a CPU with AVX-512")
def test_native_kernels_differ_from_an_avx2_cpu(tmp_path):
    """What portable mode is for: native runs here and on an AVX2-only CPU train other models."""
    runs = {}
    for name, env in (("native", {}), ("avx2", EMULATED_AVX2)):
        run_workflow(tmp_path / name, TRAIN_ONLY, env, "--config", "cpu_kernels=native")
        runs[name] = pd.read_parquet(tmp_path / name / "results/tables/runs.parquet").sort_values("checkpoint")
    assert set(runs["native"]["cpu_capability"]) == {"AVX512"} and set(runs["avx2"]["cpu_capability"]) == {"AVX2"}
    assert set(runs["native"]["cpu_kernels"]) == set(runs["avx2"]["cpu_kernels"]) == {"native"}
    same = runs["native"]["checkpoint_sha256"].to_numpy() == runs["avx2"]["checkpoint_sha256"].to_numpy()
    assert not same.any(), "native AVX-512 and AVX2 kernels trained bit-identical models"


def committed_vendor_neutral() -> dict:
    """The committed vendor_neutral hashes: one record for every vendor (made on the vendors it names)."""
    data = json.loads(NEUTRAL_HASHES.read_text())
    if data["build"] != build_facts():
        pytest.skip(f"{NEUTRAL_HASHES.name} was made with {data['build']}, this is {build_facts()}; remake it with "
                    "tests/data/make_portable_hashes.py --mode vendor_neutral")
    return data["hashes"]


def test_vendor_neutral_run_matches_committed_hashes(vendor_neutral_run):
    """vendor_neutral gives one set of bits for Intel and AMD: the committed hashes hold on this CPU, whatever its
    vendor, under a hostile environment; MKL_ENABLE_INSTRUCTIONS=SSE4_2 in it caps MKL below this CPU's ISA."""
    expected = committed_vendor_neutral()
    got = hashes(vendor_neutral_run)
    assert sorted(got) == sorted(expected)
    assert [f for f in expected if got[f] != expected[f]] == []
    runs = pd.read_parquet(vendor_neutral_run / "results/tables/runs.parquet")
    assert set(runs["cpu_kernels"]) == {"vendor_neutral"} and set(runs["cpu_capability"]) == {"DEFAULT"}


def test_vendor_neutral_bits_do_not_depend_on_the_isa_ceiling(vendor_neutral_run, tmp_path):
    """An AVX2-only CPU emulated (MKL's ceiling AVX2; the committed record had none, this CPU's widest): the same
    checkpoints. What differs between Intel and AMD besides ISA is MKL's vendor dispatch, which its COMPATIBLE
    branch does not take (docs/reproducibility.md says what this machine could and could not check)."""
    expected = committed_vendor_neutral()
    run_workflow(with_prepared_data(vendor_neutral_run, tmp_path), MODELS_ONLY, EMULATED_AVX2, *NEUTRAL)
    got = hashes(tmp_path)
    models = [f for f in got if f.startswith("work/models/")]
    assert len(models) == 6 and {f: got[f] for f in models} == {f: expected[f] for f in models}


@pytest.fixture(scope="module")
def fresh_probe(tmp_path_factory) -> Path:
    """tests/data/vendor_probe.py's record made on this machine now."""
    fresh = tmp_path_factory.mktemp("vendor_probe") / "fresh.json"
    made = subprocess.run([sys.executable, str(REPO / "tests/data/vendor_probe.py"), "--out", str(fresh)],
                          capture_output=True, text=True, env=outer_environment({"PYTHONPATH": str(REPO)}), timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    return fresh


def test_vendor_probe_repeats_this_vendors_record(fresh_probe, tmp_path):
    """tests/data/vendor_probe.py (op-by-op and AdamW step-by-step hashes in vendor_neutral mode) gives this vendor's
    committed record; its --diff names the first operation that differs from another record."""
    probe = REPO / "tests/data/vendor_probe.py"
    record = REPO / f"tests/data/vendor_probe/{kernels.cpu_info()['vendor']}.json"
    if not record.is_file():
        pytest.skip(f"no vendor probe record for {kernels.cpu_info()['vendor']} (tests/data/vendor_probe/)")
    same = subprocess.run([sys.executable, str(probe), "--diff", str(record), str(fresh_probe)], capture_output=True,
                          text=True, timeout=60)
    assert same.returncode == 0 and "the same bits" in same.stdout, same.stdout
    doctored = json.loads(record.read_text())
    doctored["adamw"][3]["exp_avg_sq"] = {k: "0" for k in doctored["adamw"][3]["exp_avg_sq"]}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(doctored))
    differ = subprocess.run([sys.executable, str(probe), "--diff", str(record), str(other)], capture_output=True,
                            text=True, timeout=60)
    assert differ.returncode == 1 and "adamw step 3: first differs at exp_avg_sq" in differ.stdout, differ.stdout


# What the committed vendor records may differ in: MKL's vector square root, and the default AdamW that takes its
# second moment's root that way (docs/reproducibility.md, "What crossed vendors"). Nothing else, and never the AdamW
# lmcflow trains with in vendor_neutral mode.
KNOWN_CROSSINGS = ("ops.sqrt: ", "adamw step ")


def unexplained(a: dict, b: dict) -> list[str]:
    """What two vendor probe records differ in beyond KNOWN_CROSSINGS (``first_difference``'s lines)."""
    return [line for line in first_difference(a, b)[0] if not line.startswith(KNOWN_CROSSINGS)]


def test_committed_vendor_records_differ_only_in_the_known_square_root():
    """Every pair of committed vendor probe records (tests/data/vendor_probe/) gives the same bits in every op but
    ``sqrt`` and in lmcflow's AdamW (``adamw_lmcflow``) wherever both hold it; a doctored record that moves
    lmcflow's AdamW is caught."""
    records = {p.stem: json.loads(p.read_text()) for p in sorted((REPO / "tests/data/vendor_probe").glob("*.json"))}
    if len(records) < 2:
        pytest.skip(f"one vendor's probe record only ({', '.join(records)})")
    names = sorted(records)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert unexplained(records[a], records[b]) == [], (a, b)
    with_fused = [n for n in names if "adamw_lmcflow" in records[n]]
    doctored = json.loads(json.dumps(records[with_fused[0]]))
    doctored["adamw_lmcflow"][5]["params"] = {k: "0" for k in doctored["adamw_lmcflow"][5]["params"]}
    diff, _ = first_difference(records[with_fused[0]], doctored)
    assert diff == [f"adamw_lmcflow step 5: first differs at params {sorted(doctored['adamw_lmcflow'][5]['params'])}"]


def test_vendor_probe_here_gives_every_other_vendors_bits_but_the_known_sqrt(fresh_probe):
    """The cross-vendor check that runs wherever the suite does: this machine's probe against the records committed
    from CPUs of other vendors, op by op and step by step, lmcflow's AdamW included where a record holds it."""
    here = json.loads(fresh_probe.read_text())
    records = sorted((REPO / "tests/data/vendor_probe").glob("*.json"))
    others = [p for p in records if p.stem != here["machine"]["vendor"]]
    if not others:
        pytest.skip("no probe record of another CPU vendor (tests/data/vendor_probe/)")
    for path in others:
        assert unexplained(json.loads(path.read_text()), here) == [], path.name
