"""Width-paper mechanism metrics (lmcflow.mechanism) on constructed cases with known answers."""
from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from lmcflow.mechanism import (
    active_overlap_rows,
    active_units,
    gaussian_weak_additivity,
    independent_jaccard,
    layer_metrics,
    lewc_rows,
    neuron_activity_rows,
    paper_interpolation,
    per_sample_cosine,
    perturbed_state,
    random_rank_reference,
    rank_stats,
    reciprocal_orthogonality_rows,
    row_cosine,
    unit_rows,
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


def test_singular_values_from_the_gram_matrix_equal_the_svd():
    from lmcflow.mechanism import singular_values

    g = torch.Generator().manual_seed(4)
    for shape in ((40, 25), (25, 40), (30, 30)):
        w = torch.randn(shape, generator=g, dtype=torch.float64)
        torch.testing.assert_close(singular_values(w), torch.linalg.svdvals(w), rtol=1e-10, atol=1e-10)
    low = torch.randn(30, 3, generator=g, dtype=torch.float64) @ torch.randn(3, 20, generator=g, dtype=torch.float64)
    s = singular_values(low)
    assert (s[3:] == 0).all() and torch.allclose(s[:3], torch.linalg.svdvals(low)[:3], rtol=1e-10)


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


def test_the_threshold_sweep_is_the_activity_at_each_threshold():
    """``active_overlap_rows`` at every τ equals ``neuron_activity_rows`` at that τ; a larger τ leaves fewer units
    active (one pass over the inputs per model for the whole sweep)."""
    a, b = mlp(16, seed=0), mlp(16, seed=1)
    x = x_gauss()
    sweep = active_overlap_rows(a, b, x, [1e-1, 1e-3, 0.5, 1e-3])
    assert [r["active_threshold"] for r in sweep] == [1e-3] * DEPTH + [1e-1] * DEPTH + [0.5] * DEPTH
    for tau in (1e-3, 1e-1, 0.5):
        one = {r["layer"]: r for r in neuron_activity_rows(a, b, x, threshold=tau)}
        for r in (r for r in sweep if r["active_threshold"] == tau):
            assert {k: v for k, v in one[r["layer"]].items() if k in r} == pytest.approx(r, nan_ok=True)
    by_layer = lambda tau: [r["n_active_a"] for r in sweep if r["active_threshold"] == tau]  # noqa: E731
    assert all(lo >= hi for lo, hi in zip(by_layer(1e-3), by_layer(0.5)))


def test_layer_metrics_rows_for_every_architecture():
    a, b = disjoint_pair()
    rows = layer_metrics(a, b, x_gauss(), [0.0, 0.5, 1.0])
    assert len(rows) == DEPTH * 3
    assert {"layer", "lam_paper", "lam_path", "lewc_cos", "lewc_cos_shuffled", "llfc_cos", "lewc_cos_perturbed",
            "weak_additivity", "weak_additivity_shuffled", "cross_ratio_a", "cross_ratio_permuted_a",
            "cross_transform_cos", "cross_transform_cos_permuted_a", "rank99_frac_a", "erank_rel_b",
            "erank_rel_random", "active_jaccard", "active_jaccard_independent"} <= set(rows[0])
    assert "lam" not in rows[0]
    for arch, shape in (("vgg11", (3, 16, 16)), ("resnet20", (3, 8, 8))):
        torch.manual_seed(0)
        spec = ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.125, norm="batchnorm")
        ma, mb = build_model(spec).eval(), build_model(spec).eval()
        x = torch.randn(16, *shape)
        rows = layer_metrics(ma, mb, x, [0.5, 1.0], batch_size=8, x_bn=x)
        n_layers = len(ma.hidden_features(x[:2]))
        assert len(rows) == 2 * n_layers and n_layers == (8 if arch == "vgg11" else 19)
        top = [r for r in rows if r["lam_paper"] == 1.0]
        assert all(r["lewc_cos"] == pytest.approx(1.0, abs=1e-6) for r in top)  # θ_1 = θ_a
        for col in ("weak_additivity", "weak_additivity_shuffled", "cross_ratio_a", "cross_ratio_permuted_b",
                    "cross_transform_cos", "cross_transform_cos_permuted_a", "lewc_cos_perturbed", "erank_rel_a"):
            assert all(math.isfinite(r[col]) for r in rows), (arch, col)


# --------------------------------------------------------------------------- conv nets: channels as units
def test_unit_rows_read_pixels_as_samples():
    t = torch.arange(2 * 3 * 2 * 2, dtype=torch.float64).reshape(2, 3, 2, 2)
    rows = unit_rows(t)
    assert rows.shape == (8, 3)
    assert torch.equal(rows[1], t[0, :, 0, 1]) and torch.equal(rows[6], t[1, :, 1, 0])
    assert unit_rows(torch.ones(4, 5)).shape == (4, 5)
    # per pixel, not per flattened map: the two maps agree at one pixel and are orthogonal at the other
    u = torch.zeros(1, 2, 1, 2)
    v = torch.zeros(1, 2, 1, 2)
    u[0, :, 0, 0], v[0, :, 0, 0] = torch.tensor([1.0, 0.0]), torch.tensor([1.0, 0.0])
    u[0, :, 0, 1], v[0, :, 0, 1] = torch.tensor([10.0, 0.0]), torch.tensor([0.0, 10.0])
    torch.testing.assert_close(row_cosine(u, v), torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert per_sample_cosine(u, v).item() == pytest.approx(1 / 101)  # the flattened map would say ~0.01


def _planted(arch: str, half: int, seed: int = 0):
    """A bias-free, norm-free conv net whose every convolution reads and writes only its own half of the channels
    (``half`` 0 or 1; the first convolution reads every input channel), so two nets of opposite halves have
    W_A z_B = W_B z_A = 0 beyond the first layer: planted orthogonal subspaces."""
    shape = (3, 16, 16) if arch == "vgg11" else (3, 8, 8)
    torch.manual_seed(seed)
    m = build_model(ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.25, bias=False, norm="none")).eval()
    g = torch.Generator().manual_seed(100 + seed)

    def own(n):
        return slice(0, n // 2) if half == 0 else slice(n // 2, n)

    with torch.no_grad():
        for name, mod in m.named_modules():
            if not isinstance(mod, (nn.Conv2d, nn.Linear)):
                continue
            w = torch.zeros_like(mod.weight)
            out_, in_ = mod.weight.shape[:2]
            first = name in ("convs.0", "stem")
            rows = slice(None) if name == "head" else own(out_)
            cols = slice(None) if first else own(in_)
            block = w[rows, cols]
            fan_in = block[0].numel()
            w[rows, cols] = torch.randn(block.shape, generator=g) * math.sqrt(2.0 / fan_in)
            mod.weight.copy_(w)
    return m, shape


@pytest.mark.parametrize("arch", ["vgg11", "resnet20"])
def test_conv_net_with_itself(arch):
    """A model paired with itself: every cosine is 1, the cross-norm ratios are 1, every unit is shared."""
    torch.manual_seed(1)
    shape = (3, 16, 16) if arch == "vgg11" else (3, 8, 8)
    m = build_model(ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.25, norm="batchnorm")).eval()
    x = torch.randn(24, *shape, generator=torch.Generator().manual_seed(2))
    rows = layer_metrics(m, copy.deepcopy(m), x, [0.25, 0.5], batch_size=12, x_bn=x)
    for r in rows:
        for col in ("lewc_cos", "llfc_cos", "weak_additivity", "weak_additivity_lewc", "cross_cos",
                    "cross_transform_cos"):
            assert r[col] == pytest.approx(1.0, abs=1e-9), (r["layer"], col, r[col])
        assert r["cross_ratio_a"] == pytest.approx(1.0) and r["cross_ratio_b"] == pytest.approx(1.0)
        assert r["active_jaccard"] == 1.0


@pytest.mark.parametrize("arch", ["vgg11", "resnet20"])
def test_conv_planted_orthogonal_subspaces(arch):
    (a, shape), (b, _) = _planted(arch, 0, seed=0), _planted(arch, 1, seed=1)
    x = torch.randn(12, *shape, generator=torch.Generator().manual_seed(3))
    ro = {r["layer"]: r for r in reciprocal_orthogonality_rows(a, b, x, batch_size=6)}
    assert len(ro) == len(a.hidden_features(x[:1]))
    assert ro[1]["cross_ratio_a"] == pytest.approx(1.0)  # the first convolution reads the same input
    for layer in range(2, len(ro) + 1):
        r = ro[layer]
        assert r["cross_ratio_a"] == 0.0 and r["cross_ratio_b"] == 0.0, (layer, r)
        assert r["cross_transform_cos"] == pytest.approx(1.0, abs=1e-12)
    # each model against a relabelled copy of itself: about half its activity lands on channels its weights ignore
    deep = [ro[layer] for layer in range(2, len(ro) + 1)]
    assert sum(r["cross_ratio_permuted_a"] for r in deep) / len(deep) > 0.3
    assert sum(r["cross_transform_cos_permuted_a"] for r in deep) / len(deep) < 0.99
    for r in weak_additivity_rows(a, b, x, [0.25, 0.5]):
        assert r["weak_additivity"] == pytest.approx(1.0, abs=1e-9)
    for r in neuron_activity_rows(a, b, x):
        assert r["active_jaccard"] == 0.0 and r["active_jaccard_independent"] > 0
    if arch == "vgg11":  # plain net, bias-free, disjoint: LEWC holds exactly at every layer
        for r in lewc_rows(a, b, x, [0.25, 0.5]):
            assert r["lewc_cos"] == pytest.approx(1.0, abs=1e-9), r
    # independent dense conv nets are far from reciprocally orthogonal
    torch.manual_seed(5)
    spec = ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.25, bias=False, norm="none")
    dense = reciprocal_orthogonality_rows(build_model(spec).eval(), build_model(spec).eval(), x)
    assert max(r["cross_ratio_a"] for r in dense[1:]) > 0.3
    assert min(r["cross_transform_cos"] for r in dense[1:]) < 0.99


def test_resnet_layers_are_the_main_path_convolutions():
    from lmcflow.mechanism import hidden_layer_weights
    from lmcflow.mechanism.orthogonality import _weight_layers_and_inputs

    m = build_model(ModelSpec(arch="resnet20", in_shape=(3, 8, 8), num_classes=10, width=0.25)).eval()
    x = torch.randn(2, 3, 8, 8)
    convs, inputs = _weight_layers_and_inputs(m, x)
    named = dict(m.named_modules())
    assert [n for n, _ in hidden_layer_weights(m)] == [next(k for k, v in named.items() if v is c) + ".weight"
                                                        for c in convs]
    feats = m.hidden_features(x)
    assert len(convs) == len(feats) == 19
    for conv, z, f in zip(convs, inputs, feats, strict=True):
        assert conv(z).shape == f.shape  # each convolution reads the previous hidden feature
    pre = m.hidden_features(x, pre=True)
    assert all(torch.equal(torch.relu(z), f) for z, f in zip(pre, feats, strict=True))


def test_perturbed_state_matches_the_distance_to_b():
    a, b = mlp(16, seed=0, bias=True), mlp(16, seed=1, bias=True)
    sd_a, sd_b = a.state_dict(), b.state_dict()
    r = perturbed_state(a, b, seed="0-1")
    for k in sd_a:
        torch.testing.assert_close((r[k] - sd_a[k]).norm(), (sd_b[k] - sd_a[k]).norm())
        assert not torch.allclose(r[k], sd_b[k])
    assert all(torch.equal(r[k], v) for k, v in perturbed_state(a, b, seed="0-1").items())  # seeded
    assert not torch.equal(perturbed_state(a, b, seed="0-2")["layers.1.weight"], r["layers.1.weight"])
    assert all(torch.equal(v, sd_a[k]) for k, v in perturbed_state(a, a).items())  # no distance, no move
    bn = build_model(ModelSpec("resnet20", (3, 8, 8), 3, width=0.25, norm="batchnorm"))
    bn2 = build_model(ModelSpec("resnet20", (3, 8, 8), 3, width=0.25, norm="batchnorm"))
    with torch.no_grad():
        bn2.stem_norm.running_var.fill_(3.0)
    rb = perturbed_state(bn, bn2)
    assert torch.equal(rb["stem_norm.running_var"], bn.state_dict()["stem_norm.running_var"])  # buffers are A's


def test_lewc_of_a_random_perturbation_is_the_flatness_control():
    """The planted pair satisfies LEWC exactly; A moved as far as B into a random direction does not."""
    a, b = disjoint_pair()
    x = x_gauss(300)
    real = {(r["layer"], r["lam_paper"]): r for r in layer_metrics(a, b, x, [0.25, 0.75])}
    for (layer, _), r in real.items():
        assert r["lewc_cos"] == pytest.approx(1.0, abs=1e-9)
        if layer >= 2:
            assert r["lewc_cos_perturbed"] < 0.99, r


def test_independent_jaccard():
    assert independent_jaccard(10, 10, 10) == 1.0
    assert independent_jaccard(5, 5, 10) == pytest.approx(2.5 / 7.5)
    assert independent_jaccard(0, 3, 10) == 0.0 and math.isnan(independent_jaccard(0, 0, 10))


@pytest.mark.parametrize("arch", ["vgg11", "resnet20"])
def test_conv_weak_additivity_by_an_explicit_pixel_loop(arch):
    """weak_additivity of a conv layer is the mean over every pixel of every input of the cosine between the
    channel vectors σ(λ z̃_A + (1−λ) z̃_B) and λσ(z̃_A) + (1−λ)σ(z̃_B): recomputed here pixel by pixel."""
    shape = (3, 16, 16) if arch == "vgg11" else (3, 8, 8)
    spec = ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.25, norm="none")
    torch.manual_seed(11)
    a, b = build_model(spec).eval(), build_model(spec).eval()
    x = torch.randn(3, *shape, generator=torch.Generator().manual_seed(12))
    lam, layer = 0.25, 2
    rows = {(r["layer"], r["lam_paper"]): r for r in weak_additivity_rows(a, b, x, [lam])}
    with torch.no_grad():
        za, zb = a.hidden_features(x, pre=True)[layer - 1].double(), b.hidden_features(x, pre=True)[layer - 1].double()
    cosines = []
    n, c, h, w = za.shape
    for i in range(n):
        for p in range(h):
            for q in range(w):
                u, v = za[i, :, p, q], zb[i, :, p, q]
                lhs = torch.relu(lam * u + (1 - lam) * v)
                rhs = lam * torch.relu(u) + (1 - lam) * torch.relu(v)
                if lhs.norm() == 0 and rhs.norm() == 0:
                    cosines.append(1.0)
                elif lhs.norm() == 0 or rhs.norm() == 0:
                    cosines.append(0.0)
                else:
                    cosines.append(float(lhs @ rhs / (lhs.norm() * rhs.norm())))
    assert len(cosines) == n * h * w and c == za.shape[1]
    assert rows[(layer, lam)]["weak_additivity"] == pytest.approx(sum(cosines) / len(cosines), abs=1e-9)
    assert rows[(layer, lam)]["weak_additivity"] < 0.999  # two independent nets: not trivially additive


@pytest.mark.parametrize(("arch", "key", "layer"), [("vgg11", "convs.2.weight", 3),
                                                    ("resnet20", "stages.1.0.conv2.weight", 9)])
def test_conv_rank_of_a_planted_low_rank_kernel(arch, key, layer):
    """A conv kernel set to Σ_k e_k f_kᵀ (two orthonormal directions of the (out, in·k·k) reshape, equal singular
    values) has rank99 = erank = 2, in the row of its layer; model B's untouched kernel is near full rank."""
    shape = (3, 16, 16) if arch == "vgg11" else (3, 8, 8)
    spec = ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.25, norm="batchnorm")
    torch.manual_seed(13)
    a, b = build_model(spec), build_model(spec)
    w = dict(a.named_parameters())[key]
    out, fan = w.shape[0], w[0].numel()
    g = torch.Generator().manual_seed(14)
    u, _ = torch.linalg.qr(torch.randn(out, 2, generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(fan, 2, generator=g, dtype=torch.float64))
    with torch.no_grad():
        w.copy_((3.0 * u @ v.T).reshape(w.shape).float())
    row = next(r for r in weight_rank_rows(a, b) if r["weight"] == key)
    assert row["layer"] == layer and row["min_dim"] == min(out, fan)
    assert row["rank99_a"] == 2 and row["erank_a"] == pytest.approx(2.0, rel=1e-5)
    assert row["erank_rel_a"] == pytest.approx(2.0 / min(out, fan), rel=1e-5)
    assert row["erank_rel_b"] > 0.5 and row["rank99_b"] > 2
