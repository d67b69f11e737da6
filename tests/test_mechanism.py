"""Width-paper mechanism metrics (lmcflow.mechanism) on constructed cases with known answers."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lmcflow.mechanism import (
    active_units,
    gaussian_weak_additivity,
    layer_metrics,
    lewc_rows,
    neuron_activity_rows,
    paper_interpolation,
    per_sample_cosine,
    random_rank_reference,
    rank_stats,
    reciprocal_orthogonality_rows,
    weak_additivity_rows,
    weight_rank_rows,
)
from lmcflow.models import ModelSpec, build_model

D_IN, HALF, DEPTH = 12, 8, 3
LAMS = [0.0, 0.25, 0.5, 0.8, 1.0]


def mlp(width_units, d_in=D_IN, depth=DEPTH, bias=False, seed=0):
    torch.manual_seed(seed)
    return build_model(ModelSpec(arch="mlp", in_shape=(d_in,), num_classes=3, width=1.0, depth=depth,
                                 base_width=width_units, bias=bias)).eval()


def disjoint_pair():
    """Two bias-free ReLU MLPs: A lives on units 0..7, B on units 8..15 of every hidden layer,
    and each model's weights read only its own units, so W_a z_b = W_b z_a = 0 (l ≥ 2)."""
    g = torch.Generator().manual_seed(0)
    models = []
    for own in (slice(0, HALF), slice(HALF, 2 * HALF)):
        m = mlp(2 * HALF)
        with torch.no_grad():
            for i, layer in enumerate(m.layers):
                w = torch.zeros_like(layer.weight)
                if i == 0:
                    w[own] = torch.randn(HALF, D_IN, generator=g)
                else:
                    w[own, own] = torch.randn(HALF, HALF, generator=g) / math.sqrt(HALF)
                layer.weight.copy_(w)
            w = torch.zeros_like(m.head.weight)
            w[:, own] = torch.randn(3, HALF, generator=g)
            m.head.weight.copy_(w)
        models.append(m)
    return models


def x_gauss(n=200, d=D_IN, seed=1):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed))


def test_paper_interpolation_convention():
    a, b = mlp(8, seed=0), mlp(8, seed=1)
    sd_a, sd_b = a.state_dict(), b.state_dict()
    mid = paper_interpolation(sd_a, sd_b, 0.3)
    for k in sd_a:
        torch.testing.assert_close(mid[k], 0.3 * sd_a[k] + 0.7 * sd_b[k])
    assert all(torch.equal(paper_interpolation(sd_a, sd_b, 1.0)[k], sd_a[k]) for k in sd_a)
    assert all(torch.equal(paper_interpolation(sd_a, sd_b, 0.0)[k], sd_b[k]) for k in sd_a)


def test_per_sample_cosine_conventions():
    u = torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    v = torch.tensor([[2.0, 0.0], [0.0, 0.0], [1.0, 0.0], [-1.0, -1.0]])
    torch.testing.assert_close(per_sample_cosine(u, v), torch.tensor([1.0, 1.0, 0.0, -1.0], dtype=torch.float64))


def test_lewc_exact_on_disjoint_orthogonal_pair():
    a, b = disjoint_pair()
    x = x_gauss()
    rows = lewc_rows(a, b, x, LAMS, batch_size=64)
    assert len(rows) == DEPTH * len(LAMS)
    for r in rows:
        assert r["lam_path"] == pytest.approx(1 - r["lam_paper"])
        assert r["lewc_cos"] == pytest.approx(1.0, abs=1e-9), r
        if r["layer"] == 1 or r["lam_paper"] in (0.0, 1.0):
            assert r["llfc_cos"] == pytest.approx(1.0, abs=1e-9), r
    # LLFC (no exponent) is not what these networks satisfy beyond layer 1.
    deep = [r for r in rows if r["layer"] == DEPTH and r["lam_paper"] == 0.25]
    assert deep[0]["llfc_cos"] < 0.99


def test_lewc_fails_for_independent_models():
    a, b = mlp(256, seed=0), mlp(256, seed=1)
    rows = lewc_rows(a, b, x_gauss(), [0.5], batch_size=100)
    by_layer = {r["layer"]: r for r in rows}
    assert by_layer[1]["lewc_cos"] < 0.97  # ≈ weak additivity of independent Gaussians (0.93)
    assert all(r["lewc_cos"] < 0.99 for r in rows)


def test_reciprocal_orthogonality_on_disjoint_pair():
    a, b = disjoint_pair()
    rows = {r["layer"]: r for r in reciprocal_orthogonality_rows(a, b, x_gauss(), batch_size=64)}
    assert rows[1]["cross_ratio_a"] == pytest.approx(1.0) and rows[1]["cross_ratio_b"] == pytest.approx(1.0)
    assert rows[1]["cross_cos"] == pytest.approx(1.0)
    for l in range(2, DEPTH + 1):
        assert rows[l]["cross_ratio_a"] == 0.0 and rows[l]["cross_ratio_b"] == 0.0
        assert rows[l]["cross_cos"] < 0.05  # cross term is the zero vector (cos 0 unless both are 0)
    # control: independent dense models are far from reciprocally orthogonal
    dense = reciprocal_orthogonality_rows(mlp(64, seed=0), mlp(64, seed=1), x_gauss())
    assert dense[1]["cross_ratio_a"] > 0.3


def test_weak_additivity_exact_on_disjoint_pair():
    a, b = disjoint_pair()
    for r in weak_additivity_rows(a, b, x_gauss(), LAMS):
        assert r["weak_additivity"] == pytest.approx(1.0, abs=1e-9)
        assert r["weak_additivity_lewc"] == pytest.approx(1.0, abs=1e-9)


def test_same_run_nulls_break_what_real_pairing_gives():
    """A model against itself: every real-pairing metric is exact, every null is not."""
    a, _ = disjoint_pair()
    x = x_gauss(400)
    lewc = {r["layer"]: r for r in lewc_rows(a, a, x, [0.25])}
    for r in lewc.values():
        assert r["lewc_cos"] == pytest.approx(1.0, abs=1e-9) and r["lewc_cos_shuffled"] < 0.95
    for r in weak_additivity_rows(a, a, x, [0.5]):
        assert r["weak_additivity"] == pytest.approx(1.0, abs=1e-9) and r["weak_additivity_shuffled"] < 0.99
    # A's hidden weights read only its own 8 of 16 units, through an orthogonal block (gain 1): a permuted
    # copy of its own features puts about half of their energy on the 8 units the weights ignore
    with torch.no_grad():
        for layer in a.layers[1:]:
            q = torch.linalg.qr(layer.weight[:HALF, :HALF])[0]
            layer.weight.zero_()
            layer.weight[:HALF, :HALF] = q
    ro = {r["layer"]: r for r in reciprocal_orthogonality_rows(a, a, x)}
    for layer in range(2, DEPTH + 1):
        assert ro[layer]["cross_ratio_a"] == pytest.approx(1.0)
        assert 0.3 < ro[layer]["cross_ratio_permuted_a"] < 0.9, ro[layer]


def test_random_rank_reference_is_the_unstructured_level():
    square = random_rank_reference((256, 256))
    assert 0.79 < square["erank_rel_random"] < 0.82  # Marchenko–Pastur, aspect ratio 1
    assert random_rank_reference((64, 784))["erank_rel_random"] > 0.95  # a wide matrix is nearly isotropic
    assert random_rank_reference((4096, 4096)) == random_rank_reference((1024, 1024))  # scaled down


def test_gaussian_weak_additivity_reference():
    ref = gaussian_weak_additivity(0.5)
    assert ref == pytest.approx((0.75 + 1 / math.pi) / math.sqrt(1 + 1 / math.pi), abs=1e-12)
    assert ref == pytest.approx(0.9304, abs=1e-4)
    assert gaussian_weak_additivity(0.0) == gaussian_weak_additivity(1.0) == 1.0
    assert gaussian_weak_additivity(0.2) == pytest.approx(gaussian_weak_additivity(0.8))
    assert gaussian_weak_additivity(0.2) > ref
    # homogeneity: only the ratio α/β matters
    assert gaussian_weak_additivity(0.125, 0.125) == pytest.approx(ref)


class _GaussianPre(nn.Module):
    """A stand-in model whose pre-activations are half of a Gaussian input."""

    def __init__(self, part):
        super().__init__()
        self.part = part
        self.act = nn.ReLU()

    def hidden_features(self, x, pre=False):
        z = x.chunk(2, dim=1)[self.part]
        return [z if pre else self.act(z)]


def test_weak_additivity_metric_matches_gaussian_reference():
    x = torch.randn(64, 2 * 4096, generator=torch.Generator().manual_seed(3))
    rows = weak_additivity_rows(_GaussianPre(0), _GaussianPre(1), x, [0.5, 0.2], batch_size=32)
    for r in rows:
        assert r["weak_additivity"] == pytest.approx(gaussian_weak_additivity(r["lam_paper"]), abs=3e-3)
        assert r["weak_additivity_gaussian"] == gaussian_weak_additivity(r["lam_paper"])
    # and a real pair of independent wide random MLPs: layer-1 pre-activations are ≈ Gaussian
    a, b = mlp(1024, d_in=256, depth=1, seed=0), mlp(1024, d_in=256, depth=1, seed=1)
    r = weak_additivity_rows(a, b, x_gauss(64, 256), [0.5])[0]
    assert r["weak_additivity"] == pytest.approx(0.9304, abs=0.01)


def test_rank_stats_known_matrices():
    g = torch.Generator().manual_seed(0)
    u, _ = torch.linalg.qr(torch.randn(10, 10, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))

    def with_spectrum(s):
        return u[:, :len(s)] @ torch.diag(torch.tensor(s, dtype=torch.float64)) @ v[:, :len(s)].T

    st = rank_stats(with_spectrum([2.0, 2.0, 2.0, 2.0]))
    assert st["rank99"] == 4 and st["rank99_frac"] == 0.5 and st["min_dim"] == 8
    assert st["erank"] == pytest.approx(4.0) and st["erank_rel"] == pytest.approx(0.5)
    st = rank_stats(with_spectrum([10.0, 1.5, 0.1]))
    # squared spectrum 100, 2.25, 0.01: 100/102.26 < 0.99 ≤ 102.25/102.26
    assert st["rank99"] == 2 and st["rank99_frac"] == 2 / 8
    p = torch.tensor([10.0, 1.5, 0.1], dtype=torch.float64) / 11.6
    assert st["erank"] == pytest.approx(math.exp(-(p * p.log()).sum().item()), rel=1e-9)
    assert rank_stats(with_spectrum([10.0, 1.5, 0.1]), energy=0.99995)["rank99"] == 3
    assert rank_stats(with_spectrum([10.0, 1.5, 0.1]), energy=0.9)["rank99"] == 1
    full = rank_stats(torch.eye(6))
    assert full["rank99"] == 6 and full["erank_rel"] == pytest.approx(1.0)
    # conv weights are reshaped to (out, in·k·k): a rank-1 kernel bank
    w = torch.randn(5, 1, generator=g)[:, :, None, None] * torch.randn(1, 3, 3, 3, generator=g)
    assert rank_stats(w)["rank99"] == 1


def test_weight_rank_rows_per_layer():
    a, b = disjoint_pair()
    rows = weight_rank_rows(a, b)
    assert [r["weight"] for r in rows] == [f"layers.{i}.weight" for i in range(DEPTH)]
    for r in rows:
        assert r["rank99_a"] <= HALF and r["rank99_b"] <= HALF
        assert r["min_dim"] == min(2 * HALF, D_IN if r["layer"] == 1 else 2 * HALF)


def test_active_units_and_jaccard():
    m2 = torch.tensor([1.0, 0.5, 1e-4, 0.0, 2e-3])
    assert active_units(m2).tolist() == [True, True, False, False, True]
    assert active_units(m2, threshold=0.6).tolist() == [True, False, False, False, False]
    assert not active_units(torch.zeros(3)).any()
    a, b = disjoint_pair()
    x = x_gauss()
    for r in neuron_activity_rows(a, b, x):
        assert r["active_jaccard"] == 0.0
        assert 1 <= r["n_active_a"] <= HALF and 1 <= r["n_active_b"] <= HALF
    same = neuron_activity_rows(a, a, x)
    assert all(r["active_jaccard"] == 1.0 for r in same)


def test_layer_metrics_rows_for_every_architecture():
    a, b = disjoint_pair()
    rows = layer_metrics(a, b, x_gauss(), [0.0, 0.5, 1.0])
    assert len(rows) == DEPTH * 3
    assert {"layer", "lam_paper", "lam_path", "lewc_cos", "lewc_cos_shuffled", "llfc_cos", "weak_additivity",
            "weak_additivity_shuffled", "cross_ratio_a", "cross_ratio_permuted_a", "rank99_frac_a", "erank_rel_b",
            "erank_rel_random", "active_jaccard"} <= set(rows[0])
    assert "lam" not in rows[0]
    for arch, shape in (("vgg11", (3, 16, 16)), ("resnet20", (3, 8, 8))):
        torch.manual_seed(0)
        spec = ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.125, norm="batchnorm")
        ma, mb = build_model(spec).eval(), build_model(spec).eval()
        x = torch.randn(16, *shape)
        rows = layer_metrics(ma, mb, x, [0.5, 1.0], batch_size=8, x_bn=x)
        n_layers = len(ma.hidden_features(x[:2]))
        assert len(rows) == 2 * n_layers
        top = [r for r in rows if r["lam_paper"] == 1.0]
        assert all(r["lewc_cos"] == pytest.approx(1.0, abs=1e-6) for r in top)  # θ_1 = θ_a
        assert all(math.isnan(r["weak_additivity"]) for r in rows)
        if arch == "vgg11":
            assert all(0 <= r["cross_ratio_a"] for r in rows)
        else:
            assert all(math.isnan(r["cross_ratio_a"]) and math.isnan(r["cross_ratio_permuted_b"]) for r in rows)
