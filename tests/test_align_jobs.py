"""Alignment, merge and mechanism jobs: align → interpolate / mechanism through the job functions of one pair
block, with checkpoints and permutation files on disk, hash-verified."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from lmcflow.alignment import (
    aligned_pair,
    apply_permutation,
    load_alignment_block,
    load_permutation_sets,
    permutation_spec,
    random_permutation,
    to_dense_form,
)
from lmcflow.checkpoints import load_checkpoint, load_models
from lmcflow.config import Point
from lmcflow.evaluation import predict
from lmcflow.io import CorruptFileError, load_tensors, save_tensors
from lmcflow.jobs.align import run_align_block
from lmcflow.jobs.mechanism import run_mechanism_block
from lmcflow.jobs.merge import run_merge_block
from lmcflow.jobs.train import run_train
from lmcflow.symmetry import effective_state_dict
from lmcflow.tables import TABLES, barrier_rows, read_table, write_table

W_ASYM = {"kind": "w_asymmetric", "sigma_f": 1.0, "mask_seed": 3, "n_fixed": 0.25}


def make_point(symmetry=None, merge_extra=None):
    model = {"arch": "mlp", "width": 1.0, "depth": 2, "base_width": 24, "bias": True, "norm": "none",
             "norm_groups": 1, "activation": "relu", "symmetry": symmetry or {"kind": "standard"}}
    train = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": False, "weight_decay": 3e-3, "epochs": 1,
             "batch_size": 128, "schedule": "cosine", "warmup_epochs": 0, "augment": "none", "precision": "fp32",
             "checkpoint_every": 0}
    merge = {"lambdas": 5, "methods": ["identity", "weight_matching", "activation_matching", "random_permutation"],
             "train_eval_size": None, "bn_reset_size": None, **(merge_extra or {})}
    return Point(study="t", point="p", dataset="syn", seeds=[0, 1], model=model, train=train, merge=merge,
                 analysis={"mechanism": {"methods": ["identity", "weight_matching"], "samples": 200}})


@pytest.fixture
def data_path(tmp_path, small_data):
    path = tmp_path / "syn.safetensors"
    tensors = {f"{k}_{s}": getattr(small_data, k)[s] for k in ("x", "y") for s in ("train", "val", "test")}
    save_tensors(path, tensors, small_data.meta)
    return path


def planted_pair(tmp_path, data_path, point):
    """Checkpoint A (trained one epoch) and B = A with its hidden units randomly permuted (dense form)."""
    ckpts = [tmp_path / "seed-0.safetensors", tmp_path / "seed-1.safetensors"]
    rows = [tmp_path / "seed-0.run.parquet", tmp_path / "seed-1.run.parquet"]
    run_train(point, 0, data_path, ckpts[0], rows[0], device="cpu")
    model, _ = load_checkpoint(ckpts[0], rows[0], "cpu")
    spec = permutation_spec(model)
    perms, _ = random_permutation(spec, seed=11)
    sd_b = apply_permutation(spec, effective_state_dict(model), perms)
    meta = {**load_tensors(ckpts[0])[1], "seed": 1}
    digest = save_tensors(ckpts[1], sd_b, meta)
    row = read_table(rows[0], "runs").iloc[0].to_dict()
    write_table(rows[1], "runs", [{**row, "seed": 1, "checkpoint": str(ckpts[1]), "checkpoint_sha256": digest}])
    return {s: [str(ckpts[s]), str(rows[s])] for s in (0, 1)}, perms


PAIRS = [(0, 1)]


def align_and_merge(tmp_path, point, method, models, data_path):
    perm, arow = tmp_path / f"{method}.safetensors", tmp_path / f"{method}.align.parquet"
    out = tmp_path / f"{method}.interp.parquet"
    run_align_block(point, method, PAIRS, models, str(data_path), str(perm), str(arow), device="cpu")
    run_merge_block(point, PAIRS, [method], models, {method: [str(perm), str(arow)]}, str(data_path), str(out),
                    device="cpu")
    row = read_table(arow, "alignment").iloc[0].to_dict()
    return row, read_table(out, "interpolation"), [str(perm), str(arow)]


def merge_identity(tmp_path, point, models, data_path):
    out = tmp_path / "identity.parquet"
    run_merge_block(point, PAIRS, ["identity"], models, {}, str(data_path), str(out), device="cpu")
    return read_table(out, "interpolation")


@pytest.mark.parametrize("symmetry,method", [(None, "weight_matching"), (None, "activation_matching"),
                                             (W_ASYM, "weight_matching"), (W_ASYM, "activation_matching")])
def test_planted_permutation_gives_zero_barrier(tmp_path, data_path, symmetry, method):
    point = make_point(symmetry)
    models, planted = planted_pair(tmp_path, data_path, point)
    row, interp, _ = align_and_merge(tmp_path, point, method, models, data_path)
    assert list(read_table(tmp_path / f"{method}.align.parquet", "alignment").columns) == \
        [c for c, _ in TABLES["alignment"]]
    assert row["dense_form"] == (symmetry is not None) and row["n_groups"] == 2 and row["n_units"] == 48
    assert len(row["permutation_sha256"]) == 64
    # the alignment undoes the planted permutation: B(aligned) == A, so every point of the path is A
    test = interp[interp.split == "test"].sort_values("lam")
    assert (test.loss - test.loss.iloc[0]).abs().max() < 1e-5 and (test.error - test.error.iloc[0]).abs().max() == 0
    b = pd.DataFrame(barrier_rows(interp))
    assert b.value.abs().max() < 1e-5
    # without alignment the same pair is not connected bit for bit
    ident = merge_identity(tmp_path, point, models, data_path)
    ident = ident[ident.split == "test"].sort_values("lam")
    assert (ident.loss - ident.loss.iloc[0]).abs().max() > 1e-4


def test_random_permutation_job_is_function_preserving_and_seeded(tmp_path, data_path):
    point = make_point()
    models, _ = planted_pair(tmp_path, data_path, point)
    row, interp, alignment = align_and_merge(tmp_path, point, "random_permutation", models, data_path)
    assert row["frac_unmoved"] < 0.5
    ends = interp[(interp.split == "test") & interp.lam.isin([0.0, 1.0])].sort_values("lam")
    ref = read_table(models[0][1], "runs").iloc[0]
    assert abs(ends.loss.iloc[0] - ref.test_loss) < 1e-5 and abs(ends.loss.iloc[1] - ref.test_loss) < 1e-5
    run_align_block(point, "random_permutation", PAIRS, models, str(data_path), str(tmp_path / "r2.st"),
                    str(tmp_path / "r2.parquet"), device="cpu")
    p1, p2 = load_permutation_sets(alignment[0])[0][(0, 1)], load_permutation_sets(tmp_path / "r2.st")[0][(0, 1)]
    assert p1.keys() == p2.keys() and all(torch.equal(p1[g], p2[g]) for g in p1)  # seeded per point and pair
    # the same computation gives the same bytes: no timings or paths inside the permutation file
    assert (tmp_path / "r2.st").read_bytes() == open(alignment[0], "rb").read()


def test_corrupt_or_mismatched_permutation_file_is_refused(tmp_path, data_path):
    point = make_point()
    models, _ = planted_pair(tmp_path, data_path, point)
    _, _, (perm, arow) = align_and_merge(tmp_path, point, "weight_matching", models, data_path)
    with pytest.raises(ValueError, match="alignment rows are for"):
        load_alignment_block(point, "activation_matching", perm, arow)
    with open(perm, "r+b") as fh:
        fh.seek(-3, 2)
        fh.write(b"\x00\x01\x02")
    with pytest.raises(CorruptFileError, match="does not match the recorded"):
        load_alignment_block(point, "weight_matching", perm, arow)


def test_activation_matching_on_trained_w_asymmetric_models_preserves_b(tmp_path, data_path):
    """Two independently trained W-asymmetric MLPs: the aligned B (dense form) computes B's function."""
    point = make_point(W_ASYM)
    models = {s: [str(tmp_path / f"seed-{s}.safetensors"), str(tmp_path / f"seed-{s}.run.parquet")] for s in (0, 1)}
    for s in (0, 1):
        run_train(point, s, data_path, *models[s], device="cpu")
    perm, arow = str(tmp_path / "am.safetensors"), str(tmp_path / "am.parquet")
    run_align_block(point, "activation_matching", PAIRS, models, str(data_path), perm, arow, device="cpu")
    row = read_table(arow, "alignment").iloc[0]
    assert row["dense_form"] and 0 < row["objective"] <= 1 and row["n_samples"] == 512
    loaded = load_models(models, "cpu")
    perms = load_alignment_block(point, "activation_matching", perm, arow)[(0, 1)]
    model_a, model_b, dense = aligned_pair(loaded[0], loaded[1], perms)
    original_b, _ = load_checkpoint(*models[1], "cpu")
    x = torch.randn(64, 20, generator=torch.Generator().manual_seed(0))
    assert dense and torch.allclose(predict(model_b, x), predict(original_b, x), atol=1e-5)
    # dense form: masks are all ones, offsets zero, weights are W_eff
    sd = model_b.state_dict()
    assert torch.equal(sd["layers.0.mask"], torch.ones_like(sd["layers.0.mask"]))
    assert not to_dense_form(torch.nn.Linear(2, 2))


def test_mechanism_job_on_planted_pair(tmp_path, data_path):
    point = make_point()
    models, _ = planted_pair(tmp_path, data_path, point)
    _, _, alignment = align_and_merge(tmp_path, point, "weight_matching", models, data_path)
    out = tmp_path / "mech.parquet"
    run_mechanism_block(point, "weight_matching", PAIRS, models, alignment, str(data_path), str(out), device="cpu",
                        out_overlap=str(tmp_path / "overlap.parquet"))
    lm = read_table(out, "layer_metrics")
    # the τ sweep beside it: at analysis.mechanism.active_threshold it is layer_metrics' overlap
    ov = read_table(tmp_path / "overlap.parquet", "active_overlap")
    assert sorted(set(ov.active_threshold)) == [1e-3, 1e-2, 1e-1] and len(ov) == 3 * 2
    at = ov[ov.active_threshold == 1e-3].set_index("layer")
    lm_half = lm[lm.lam_paper == 0.5].set_index("layer")
    assert np.allclose(at.active_jaccard, lm_half.active_jaccard) and (at.n_active_a == lm_half.n_active_a).all()
    assert list(lm.columns) == [c for c, _ in TABLES["layer_metrics"]]
    assert len(lm) == 2 * 5 and set(lm.layer) == {1, 2} and (lm.n_samples == 200).all()
    assert np.allclose(lm.lam_paper + lm.lam_path, 1.0)
    # B aligned == A: every interpolated model is A, so LEWC and LLFC cosines are 1
    assert np.allclose(lm.lewc_cos, 1, atol=1e-6) and np.allclose(lm.llfc_cos, 1, atol=1e-6)
    assert np.allclose(lm.active_jaccard, 1) and np.allclose(lm.erank_a, lm.erank_b)
    # unaligned: the same pair is far from LLFC in layer 2
    run_mechanism_block(point, "identity", PAIRS, models, None, str(data_path), str(tmp_path / "m0.parquet"),
                        device="cpu")
    m0 = read_table(tmp_path / "m0.parquet", "layer_metrics")
    assert m0[(m0.layer == 2) & (m0.lam_paper == 0.5)].llfc_cos.iloc[0] < 0.999
