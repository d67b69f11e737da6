"""Models from outside lmcflow through its own job functions, in one process: torchvision's mnasnet0_5 (named as a
config names it, ``torchvision:mnasnet0_5``; versioned, so its checkpoints carry PyTorch's ``_metadata``; dropout
before its classifier) trained alone, and a user's MLP with two dropout layers (``model.factory``) trained as one
bundle of two; each pair aligned by weight matching on its derived, proven spec (rule ``align``:
``run_align_block``) and interpolated (rule ``interpolate``: ``run_merge_block``, which checks that the permuted B
computes B's function); 320 synthetic 16×16 RGB images of 10 classes, one epoch. About 18 CPU-seconds; the same
two studies as a Snakemake run (`torchvision:mnasnet0_5` and this module's factory with `train.bundle: 2` on a
320-image Fashion-MNIST subset) are 21 jobs and 95 CPU-seconds, each job importing torch."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

from lmcflow.alignment import apply_permutation, load_permutation_sets, permutation_spec
from lmcflow.checkpoints import load_checkpoint
from lmcflow.config import Point
from lmcflow.evaluation import reset_bn_stats
from lmcflow.io import load_tensors, save_tensors
from lmcflow.jobs.align import run_align_block
from lmcflow.jobs.merge import run_merge_block
from lmcflow.jobs.train import run_train, run_train_bundle
from lmcflow.models import ModelSpec, build_model, has_batchnorm
from lmcflow.state import versioned
from lmcflow.tables import barrier_rows, read_table

SHAPE, CLASSES = (3, 16, 16), 10
PAIRS = [(0, 1)]
SEEDS = (0, 1)


def dropout_mlp(num_classes: int, in_shape: tuple, hidden: int = 32) -> nn.Module:
    """A user's MLP with active dropout (``model.factory: tests.test_tiny_external_jobs:dropout_mlp``)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(in_shape), hidden), nn.ReLU(), nn.Dropout(0.2),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, num_classes))


MODELS = {"mnasnet": {"arch": "torchvision:mnasnet0_5"},
          "dropout_mlp": {"arch": "factory", "factory": "tests.test_tiny_external_jobs:dropout_mlp"}}


def _point(name: str) -> Point:
    train = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "epochs": 1, "batch_size": 64,
             "schedule": "cosine", "augment": "none", "precision": "fp32", "checkpoint_every": 0}
    merge = {"lambdas": 3, "methods": ["identity", "weight_matching"], "train_eval_size": None,
             "bn_reset_size": None}
    return Point(study="tiny", point=name, dataset="syn", seeds=list(SEEDS), model=MODELS[name], train=train,
                 merge=merge)


@pytest.fixture(scope="module")
def data_path(tmp_path_factory):
    """Class-dependent images: each class a fixed random image plus noise (learnable in one epoch)."""
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(CLASSES, *SHAPE, generator=g)

    def make(n):
        y = torch.arange(n) % CLASSES
        return centers[y] + 0.8 * torch.randn(n, *SHAPE, generator=g), y

    splits = {"train": make(320), "val": make(64), "test": make(128)}
    path = tmp_path_factory.mktemp("syn") / "syn.safetensors"
    save_tensors(path, {f"{k}_{s}": xy[i] for s, xy in splits.items() for i, k in enumerate(("x", "y"))},
                 {"in_shape": list(SHAPE), "num_classes": CLASSES, "task": "classification"})
    return path


def _train(tmp_path, data_path, point: Point, bundle: bool) -> dict:
    models = {s: [str(tmp_path / f"seed-{s}.safetensors"), str(tmp_path / f"seed-{s}.run.parquet")] for s in SEEDS}
    if bundle:
        run_train_bundle([{"point": point, "seed": s, "ckpt": c, "row": r} for s, (c, r) in models.items()],
                         {"syn": str(data_path)}, device="cpu")
    else:
        for s, (c, r) in models.items():
            run_train(point, s, str(data_path), c, r, device="cpu")
    return models


@pytest.mark.parametrize(("name", "bundle"), [("mnasnet", False), ("dropout_mlp", True)])
def test_an_external_model_trains_aligns_and_merges_through_the_jobs(tmp_path, data_path, name, bundle):
    point = _point(name)
    models = _train(tmp_path, data_path, point, bundle)
    runs = [read_table(r, "runs").iloc[0] for _, r in models.values()]
    assert [r.bundle_id for r in runs] == (["tiny/dropout_mlp/seeds-0+1"] * 2 if bundle else
                                           [f"tiny/mnasnet/seed-{s}" for s in SEEDS])
    assert all(math.isfinite(r.train_loss) and math.isfinite(r.test_loss) for r in runs)
    # checkpoints reload strictly into a model built from their recorded spec, mnasnet's with its _metadata
    loaded = {}
    for s, (ckpt, row) in models.items():
        sd, meta = load_tensors(ckpt)
        fresh = build_model(ModelSpec.from_dict(meta["model_spec"]))
        assert versioned(fresh) == (name == "mnasnet")
        assert (getattr(sd, "_metadata", None) is not None) == versioned(fresh)
        fresh.load_state_dict(sd, strict=True)
        loaded[s] = load_checkpoint(ckpt, row, "cpu")[0].eval()
    sa, sb = loaded[0].state_dict(), loaded[1].state_dict()
    assert any(not torch.equal(sa[k], sb[k]) for k in sa)  # two seeds, two models

    perm_file, align_rows = tmp_path / "wm.safetensors", tmp_path / "wm.align.parquet"
    run_align_block(point, "weight_matching", PAIRS, models, str(data_path), str(perm_file), str(align_rows),
                    device="cpu")
    spec = permutation_spec(loaded[1])
    assert spec.proof_residual < 1e-8 and len(spec.groups) >= (10 if name == "mnasnet" else 2)
    row = read_table(align_rows, "alignment").iloc[0]
    assert row.n_groups == len(spec.groups) and row.frac_unmoved < 0.5
    assert row.objective >= row.objective_identity
    perms = load_permutation_sets(perm_file)[0][PAIRS[0]]
    # B permuted by weight matching computes B's function and loads strictly into a fresh builder. MNASNet's
    # BatchNorm momentum (3e-4) leaves its running statistics near their initial values after a few steps, so B's
    # are re-estimated first, as the merge job does at every λ
    data = load_tensors(data_path)[0]
    if has_batchnorm(loaded[1]):
        reset_bn_stats(loaded[1], data["x_train"])
    b_aligned = apply_permutation(spec, loaded[1].state_dict(), perms)
    permuted = build_model(ModelSpec.from_dict(load_tensors(models[1][0])[1]["model_spec"]))
    permuted.load_state_dict(b_aligned, strict=True)
    with torch.no_grad():
        y, y_permuted = loaded[1](data["x_test"]), permuted.eval()(data["x_test"])
    assert (y_permuted - y).abs().max() <= 1e-5 * y.abs().max()

    out = tmp_path / "interp.parquet"
    run_merge_block(point, PAIRS, ["identity", "weight_matching"], models,
                    {"weight_matching": [str(perm_file), str(align_rows)]}, str(data_path), str(out), device="cpu")
    interp = read_table(out, "interpolation")
    assert set(interp.method) == {"identity", "weight_matching"} and set(interp.lam) == {0.0, 0.5, 1.0}
    test = interp[interp.split == "test"]
    ends = {m: rows.sort_values("lam").loss.tolist() for m, rows in test[test.lam.isin([0.0, 1.0])].groupby("method")}
    assert ends["weight_matching"] == pytest.approx(ends["identity"], rel=1e-5)  # B aligned is B's function
    if not has_batchnorm(loaded[0]):  # the endpoints are the trained models (with BatchNorm: re-estimated)
        assert ends["identity"] == pytest.approx([runs[0].test_loss, runs[1].test_loss], rel=1e-5)
    mid = test[test.lam == 0.5]
    assert mid.loss.map(math.isfinite).all() and mid.acc.between(0, 1).all()  # the merged models evaluate
    barriers = pd.DataFrame(barrier_rows(interp))
    assert len(barriers) and barriers.value.map(math.isfinite).all()
