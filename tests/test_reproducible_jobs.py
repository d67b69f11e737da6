"""Job outputs are functions of their inputs: the same job run twice, in two folders, writes the same bytes."""
from __future__ import annotations

import json
import platform
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import torch
from safetensors import safe_open

from lmcflow import kernels
from lmcflow.config import Point
from lmcflow.io import save_tensors
from lmcflow.jobs.align import run_align_block
from lmcflow.jobs.report import run_provenance
from lmcflow.jobs.train import run_train
from lmcflow.provenance import code_version, package_version, torch_version
from lmcflow.tables import RUN_SPECIFIC_COLUMNS, read_table

REPO = Path(__file__).resolve().parents[1]


def make_point() -> Point:
    model = {"arch": "mlp", "width": 1.0, "depth": 2, "base_width": 16, "bias": True, "norm": "none",
             "norm_groups": 1, "activation": "relu", "symmetry": {"kind": "standard"}}
    train = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": False, "weight_decay": 3e-3, "epochs": 2,
             "batch_size": 128, "schedule": "cosine", "warmup_epochs": 0, "augment": "none", "precision": "fp32",
             "checkpoint_every": 1}
    merge = {"lambdas": 3, "methods": ["identity", "weight_matching"], "train_eval_size": None, "bn_reset_size": None}
    return Point(study="t", point="p", dataset="syn", seeds=[0, 1], model=model, train=train, merge=merge, analysis={})


def run_jobs(folder: Path, small_data, monkeypatch) -> None:
    """Prepared data, two trained models and a weight-matching alignment, with paths relative to ``folder``."""
    folder.mkdir()
    monkeypatch.chdir(folder)
    tensors = {f"{k}_{s}": getattr(small_data, k)[s] for k in ("x", "y") for s in ("train", "val", "test")}
    save_tensors("data.safetensors", tensors, small_data.meta)
    point = make_point()
    for seed in (0, 1):
        run_train(point, seed, "data.safetensors", f"seed-{seed}.safetensors", f"seed-{seed}.run.parquet", "cpu")
    models = {s: [f"seed-{s}.safetensors", f"seed-{s}.run.parquet"] for s in (0, 1)}
    run_align_block(point, "weight_matching", [(0, 1)], models, "data.safetensors", "perm.safetensors",
                    "align.parquet", "cpu")


def test_checkpoints_and_permutation_files_are_byte_identical(tmp_path, small_data, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    run_jobs(a, small_data, monkeypatch)
    run_jobs(b, small_data, monkeypatch)
    for name in ("data.safetensors", "seed-0.safetensors", "seed-1.safetensors", "perm.safetensors"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    with safe_open(str(a / "perm.safetensors"), framework="pt") as fh:
        meta = json.loads(fh.metadata()["lmcflow"])
    assert meta["method"] == "weight_matching" and meta["pairs"] == [[0, 1]] and "seconds" not in meta
    for name, kind in (("seed-1.run.parquet", "runs"), ("align.parquet", "alignment")):
        ta, tb = read_table(a / name, kind), read_table(b / name, kind)
        drop = list(RUN_SPECIFIC_COLUMNS[kind])
        pd.testing.assert_frame_equal(ta.drop(columns=drop), tb.drop(columns=drop))
    assert read_table(a / "align.parquet", "alignment").align_seconds.iloc[0] > 0  # the timing went to the row


def test_figures_carry_no_date_or_software_version(tmp_path):
    from lmcflow.figures.common import plt, save_figure

    def figure():
        fig, ax = plt.subplots()
        ax.plot([0, 0.5, 1], [0.1, 0.3, 0.1])
        return fig

    for name in ("a", "b"):
        save_figure(figure(), tmp_path / f"{name}.png", tmp_path / f"{name}.pdf")
    for ext in ("png", "pdf"):
        data = (tmp_path / f"a.{ext}").read_bytes()
        assert data == (tmp_path / f"b.{ext}").read_bytes()
        assert b"CreationDate" not in data and b"Software" not in data and b"Matplotlib" not in data, ext


def test_provenance_names_the_commit_torch_and_hardware(tmp_path, monkeypatch):
    code = code_version()
    assert code["lmcflow_version"]
    if (REPO / ".git").exists() and shutil.which("git"):
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout
        assert code["lmcflow_commit"] == head.strip() and isinstance(code["lmcflow_tree_dirty"], bool)
    assert torch_version() == torch.__version__  # with its build tag, e.g. 2.14.1+cu130
    assert package_version("torch") == torch.__version__.split("+")[0]
    assert package_version("no-such-package-lmcflow") is None
    from lmcflow.tables import write_table
    from tests.test_verify import row

    monkeypatch.chdir(tmp_path)
    write_table("runs.parquet", "runs", [
        row("runs", device="cpu:x86_64", precision="fp32", cpu_kernels="portable", cpu_capability="AVX2",
            train_threads=2),
        row("runs", device="cuda:H200", precision="bf16", cpu_kernels="native", cpu_capability="AVX512",
            train_threads=1)])
    outputs = []
    for name in ("a", "b"):
        prov = run_provenance("runs.parquet", f"{name}.json", f"{name}.html")
        outputs.append([(tmp_path / f"{name}.{ext}").read_bytes() for ext in ("json", "html")])
    assert outputs[0] == outputs[1]
    build = torch.__config__.show()
    cpu = kernels.cpu_info()
    assert prov == {**code, "torch_version": torch.__version__, "device": ["cpu:x86_64", "cuda:H200"],
                    "precision": ["bf16", "fp32"], "cpu_kernels": ["native", "portable"],
                    "cpu_capability": ["AVX2", "AVX512"], "train_threads": [1, 2],
                    "cpu_model": cpu["model"], "cpu_arch": platform.machine(), "cpu_simd": cpu["simd"],
                    "mkl_version": prov["mkl_version"], "onednn_version": prov["onednn_version"],
                    "openmp_version": prov["openmp_version"], "torch_blas": prov["torch_blas"]}
    for key in ("mkl_version", "onednn_version", "openmp_version", "torch_blas"):
        assert prov[key] and prov[key] in build, key
    assert json.loads(outputs[0][0]) == prov
    html = outputs[0][1].decode()
    assert torch.__version__ in html and "cpu:x86_64, cuda:H200" in html and str(code["lmcflow_commit"] or "") in html
