"""Synthetic generators: deterministic per seed, and they hit their intrinsic dimension k / coherence ν."""
from __future__ import annotations

import pytest
import torch

from lmcflow.data import SYNTHETIC_DATASETS, load_dataset, prepare_dataset
from lmcflow.identifiability import (
    intrinsic_dimension,
    principal_subspace,
    subspace_coherence,
)
from lmcflow.synthetic import (
    coherence,
    coherence_embedding,
    gaussian_subspace,
    gaussian_subspace_task,
)

GS = {"classes": 5, "k": 6, "d": 40, "separation": 1.5, "n_train": 600, "n_val": 100, "n_test": 200}


def _same(a, b):
    return all(torch.equal(a[s][0], b[s][0]) and torch.equal(a[s][1], b[s][1]) for s in a)


def test_registered():
    assert SYNTHETIC_DATASETS["gaussian_subspace"] is gaussian_subspace
    assert SYNTHETIC_DATASETS["coherence"] is coherence


def test_gaussian_subspace_deterministic_per_seed():
    a, meta = gaussian_subspace(GS, 3)
    b, _ = gaussian_subspace(GS, 3)
    c, _ = gaussian_subspace(GS, 4)
    assert _same(a, b) and not _same(a, c)
    # a seed in params overrides the argument
    d, _ = gaussian_subspace({**GS, "seed": 3}, 99)
    assert _same(a, d)
    assert meta == {**meta, "in_shape": [40], "num_classes": 5, "task": "classification", "k": 6}
    assert {s: len(a[s][1]) for s in a} == {"train": 600, "val": 100, "test": 200}
    assert a["train"][0].dtype == torch.float32 and a["train"][1].dtype == torch.int64


@pytest.mark.parametrize("k", [1, 3, 12])
def test_gaussian_subspace_hits_k(k):
    splits, _ = gaussian_subspace({**GS, "k": k}, 0)
    x = torch.cat([splits[s][0] for s in splits]).double()
    assert torch.linalg.matrix_rank(x, rtol=1e-5).item() == k
    task = gaussian_subspace_task({**GS, "k": k}, 0)
    u = task["basis"]
    torch.testing.assert_close(x @ u @ u.T, x, atol=1e-4, rtol=1e-4)  # inside span(U)
    assert intrinsic_dimension(x, 0.9999) == k
    # standardised: mean squared coordinate ≈ 1 for any k
    assert 0.7 < x.pow(2).mean().item() < 1.3
    y = splits["train"][1]
    assert set(y.tolist()) == set(range(5))


def test_gaussian_subspace_classes_differ_in_mean_and_rotation():
    task = gaussian_subspace_task(GS, 0)
    assert not torch.allclose(task["rotations"][0], task["rotations"][1])
    r = task["rotations"][2]
    torch.testing.assert_close(r.T @ r, torch.eye(6, dtype=r.dtype))
    assert torch.cdist(task["means"], task["means"]).fill_diagonal_(1).min() > 0


@pytest.mark.parametrize("embedding", ["exact_copy", "random_tight_frame"])
def test_coherence_embeddings_hit_nu(embedding):
    for m in range(1, 11):
        e = coherence_embedding(m, embedding, 20, seed=5)
        torch.testing.assert_close(e.T @ e, torch.eye(2, dtype=e.dtype))
        assert abs(subspace_coherence(e) - 1 / m) < 1e-12
        assert int(((e * e).sum(1) > 1e-12).sum()) == 2 * m  # 2m active coordinates


@pytest.mark.parametrize("embedding", ["exact_copy", "random_tight_frame"])
def test_coherence_dataset_deterministic_and_on_its_subspace(embedding):
    p = {"m": 4, "embedding": embedding, "n_train": 500, "n_val": 50, "n_test": 100}
    a, meta = coherence(p, 1)
    b, _ = coherence(p, 1)
    c, _ = coherence(p, 2)
    assert _same(a, b) and not _same(a, c)
    assert meta["task"] == "regression" and meta["num_classes"] == 1 and meta["in_shape"] == [20]
    assert meta["nu"] == 0.25 and meta["k"] == 2
    x, y = a["train"]
    e = torch.tensor(meta["basis"], dtype=torch.float64)
    z = x.double() @ e  # E has orthonormal columns: z = Eᵀx
    torch.testing.assert_close(y.double(), torch.relu(z.sum(1)), atol=1e-5, rtol=1e-5)
    u, _ = principal_subspace(x, 0.9999)
    assert u.shape[1] == 2
    assert abs(subspace_coherence(u) - 0.25) < 1e-4  # ν of the data's own principal subspace


def test_exact_copy_copies_coordinates():
    a, _ = coherence({"m": 3, "embedding": "exact_copy", "n_train": 10, "n_val": 0, "n_test": 0}, 0)
    x = a["train"][0]
    torch.testing.assert_close(x[:, 0], x[:, 2])
    torch.testing.assert_close(x[:, 3], x[:, 5])
    assert torch.all(x[:, 6:] == 0)


@pytest.mark.parametrize("fn,params,key", [
    (gaussian_subspace, {"k": 50, "d": 40}, "k"),
    (gaussian_subspace, {"clases": 3}, "clases"),
    (gaussian_subspace, {"separation": -1}, "separation"),
    (coherence, {"m": 11}, "m"),
    (coherence, {"embedding": "frame"}, "embedding"),
])
def test_bad_params_name_the_key(fn, params, key):
    with pytest.raises(ValueError, match=rf"\.{key}"):
        fn(params, 0)


def test_prepare_dataset_round_trip(tmp_path):
    cfg = {"synthetic": {"gsub_k4": {"generator": "gaussian_subspace", **GS, "k": 4},
                         "coh_m2": {"generator": "coherence", "m": 2, "embedding": "random_tight_frame",
                                    "n_train": 100, "n_val": 20, "n_test": 30}}}
    prepare_dataset("gsub_k4", cfg, tmp_path / "g.safetensors", tmp_path)
    prepare_dataset("coh_m2", cfg, tmp_path / "c.safetensors", tmp_path)
    g, c = load_dataset(tmp_path / "g.safetensors"), load_dataset(tmp_path / "c.safetensors")
    assert g.in_shape == (40,) and g.num_classes == 5 and g.task == "classification"
    assert c.task == "regression" and c.num_classes == 1 and c.meta["nu"] == 0.5
    splits, _ = gaussian_subspace({**GS, "k": 4}, 0)
    assert torch.equal(g.x["train"], splits["train"][0])


def test_gaussian_subspace_authors_generator():
    """The identifiability authors' setting: signed N(0, 1) noise scales and no normalisation."""
    p = {**GS, "noise_scales": "signed_normal", "standardize": False, "separation": 0.3}
    task = gaussian_subspace_task(p, 0)
    assert task["global_scale"] == 1.0 and (task["scales"] < 0).any() and (task["scales"] > 0).any()
    assert gaussian_subspace_task({**GS, "separation": 0.3}, 0)["scales"].min() >= 0.5
    splits, _ = gaussian_subspace(p, 0)
    x = torch.cat([splits[s][0] for s in splits]).double()
    assert torch.linalg.matrix_rank(x, rtol=1e-5).item() == GS["k"]
    # no normalisation: E‖x‖² = mean_c ‖μ_c‖² + Σ s_j² (the rotations keep norms)
    energy = float((task["means"] ** 2).sum(1).mean() + (task["scales"] ** 2).sum())
    assert x.pow(2).sum(1).mean().item() == pytest.approx(energy, rel=0.15)
    with pytest.raises(ValueError, match=r"\.noise_scales"):
        gaussian_subspace({**GS, "noise_scales": "normal"}, 0)


def test_random_tight_frames_are_nested_in_m():
    """The authors' random frame: one coordinate order and one angle per copy for all m of a seed."""
    e3, e5 = coherence_embedding(3, "random_tight_frame", 20, seed=5), coherence_embedding(5, "random_tight_frame",
                                                                                          20, seed=5)
    active3 = (e3 * e3).sum(1) > 0
    torch.testing.assert_close(e3[active3] * 3 ** 0.5, e5[active3] * 5 ** 0.5)
    assert not torch.equal(e3, coherence_embedding(3, "random_tight_frame", 20, seed=6))
