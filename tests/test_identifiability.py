"""Identifiability metrics: activation matching, realization / swap costs, coherence, barriers."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lmcflow.correlation import feature_correlations
from lmcflow.identifiability import (
    activation_matching_rows,
    coherence_row,
    layer_inputs,
    matching_objective,
    path_barrier_row,
    principal_subspace,
    realization_costs,
    regression_midpoint_barrier,
    subspace_coherence,
    swap_cost_analysis,
    swap_cost_long,
    swap_costs,
    swap_summary,
)
from lmcflow.models import ModelSpec, build_model
from lmcflow.symmetry import effective_weight, make_conv2d

W_ASYM = {"kind": "w_asymmetric", "sigma_f": 1.0, "mask_seed": 7, "n_fixed": 4}


def mlp(sym=None, width=16, d_in=12):
    return build_model(ModelSpec("mlp", (d_in,), 3, base_width=width, depth=2, norm="layernorm",
                                 activation="gelu", symmetry=sym)).eval()


# --------------------------------------------------------------------------- coherence
def test_coherence_coordinate_aligned_is_one():
    u = torch.eye(10, dtype=torch.float64)[:, [2, 5, 7]]
    assert subspace_coherence(u) == 1.0


def test_coherence_tight_frame_is_k_over_d():
    d, k = 6, 2
    theta = math.pi * torch.arange(d, dtype=torch.float64) / d
    u = torch.stack([theta.cos(), theta.sin()], 1) * math.sqrt(k / d)  # harmonic tight frame, orthonormal columns
    assert abs(subspace_coherence(u) - k / d) < 1e-12
    # rotating the basis within the subspace does not change ν
    rot = torch.tensor([[0.6, -0.8], [0.8, 0.6]], dtype=torch.float64)
    assert abs(subspace_coherence(u @ rot) - k / d) < 1e-12
    assert coherence_row(u) == {"d": 6, "k": 2, "nu": pytest.approx(1 / 3), "nu_min": 1 / 3}


def test_coherence_rejects_non_orthonormal():
    with pytest.raises(ValueError, match="orthonormal"):
        subspace_coherence(2 * torch.eye(4)[:, :2])


def test_principal_subspace_threshold():
    g = torch.Generator().manual_seed(0)
    scales = torch.tensor([10.0, 5.0, 1.0, 0.1])
    x = torch.randn(4000, 4, generator=g) * scales
    u, explained = principal_subspace(x, 0.9)
    assert u.shape == (4, 2) and explained >= 0.9  # 100+25 of 126 ≈ 99%; 100/126 < 0.9
    torch.testing.assert_close(u.abs().argmax(0), torch.tensor([0, 1]))


# --------------------------------------------------------------------------- realization / swap costs
def test_realization_costs_exact_on_hand_made_case():
    # d = 3 inputs, data subspace U = span(e1, e2); two neurons.
    u = torch.eye(3, dtype=torch.float64)[:, :2]
    mask = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    offset = torch.tensor([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
    w_eff = torch.tensor([[1.0, 2.0, 5.0], [3.0, 4.0, 0.0]])
    m, r = realization_costs(w_eff, mask, offset, u)
    # a_0 = (1, 2), a_1 = (3, 4); v_0 = (0, 2), v_1 = 0; S_0⁺ = diag(1, 0), S_1⁺ = I
    expected = torch.tensor([[1.0, 9.0], [5.0, 25.0]], dtype=torch.float64)
    torch.testing.assert_close(m, expected)
    # slot 0 cannot move the e2-coordinate (fixed at 2): neuron 1 needs 4 there -> residual 2² = 4
    torch.testing.assert_close(r, torch.tensor([[0.0, 4.0], [0.0, 0.0]], dtype=torch.float64))
    t = swap_costs(m)
    torch.testing.assert_close(t, torch.tensor([[0.0, -12.0], [-12.0, 0.0]], dtype=torch.float64))
    s = swap_summary(t, m, r)
    assert s["swap_frac_negative"] == 1.0 and s["frac_unrealizable"] == 0.5


def test_swap_costs_symmetric_zero_diagonal_and_zero_for_standard_layers():
    g = torch.Generator().manual_seed(0)
    u = torch.linalg.qr(torch.randn(20, 4, generator=g, dtype=torch.float64))[0]
    w = torch.randn(9, 20, generator=g)
    mask = (torch.rand(9, 20, generator=g) > 0.3).float()
    offset = (1 - mask) * torch.randn(9, 20, generator=g)
    t = swap_costs(realization_costs(w, mask, offset, u)[0])
    torch.testing.assert_close(t, t.T)
    assert torch.all(torch.diagonal(t) == 0)
    assert t.abs().max() > 1e-3  # the asymmetric layer does have non-trivial swap costs
    t_std = swap_costs(realization_costs(w, torch.ones_like(w), torch.zeros_like(w), u)[0])
    assert t_std.abs().max() < 1e-9


def test_swap_summary_low_tail_relative_to_self_costs():
    m = torch.tensor([[1.0, 3.0, 9.0], [3.0, 1.0, 1.5], [9.0, 1.5, 1.0]], dtype=torch.float64)
    t = swap_costs(m)  # off-diagonal: T_01 = 4, T_02 = 16, T_12 = 1 (each twice)
    out = swap_summary(t, m)
    assert out["self_cost_mean"] == 1.0
    assert out["swap_frac_cheap"] == 0.0  # no swap cheaper than realizing one neuron (1.0)
    assert out["swap_q10_relative"] == pytest.approx(float(torch.quantile(torch.tensor([4., 4., 16., 16., 1., 1.],
                                                                          dtype=torch.float64), 0.1)))
    cheap = swap_summary(swap_costs(m * torch.tensor([[1.0, 0.1, 1.0], [0.1, 1.0, 1.0], [1.0, 1.0, 1.0]],
                                                     dtype=torch.float64)), m)
    assert cheap["swap_frac_cheap"] == pytest.approx(2 / 6)  # T_01 = 0.6 − 2 < 1


def test_realization_cost_is_min_norm_of_trainable_weights():
    """M_ij equals the least ‖x‖² with Uᵀ(d_i⊙x) = a_j − v_i (checked with lstsq)."""
    g = torch.Generator().manual_seed(1)
    u = torch.linalg.qr(torch.randn(12, 3, generator=g, dtype=torch.float64))[0]
    w = torch.randn(5, 12, generator=g, dtype=torch.float64)
    mask = (torch.rand(5, 12, generator=g) > 0.4).double()
    offset = (1 - mask) * torch.randn(5, 12, generator=g, dtype=torch.float64)
    m, _ = realization_costs(w, mask, offset, u)
    i, j = 1, 3
    a_mat = u.T * mask[i]  # Uᵀ diag(d_i)
    target = u.T @ w[j] - u.T @ offset[i]
    x = torch.linalg.pinv(a_mat) @ target  # minimum-norm solution
    torch.testing.assert_close(a_mat @ x, target)
    torch.testing.assert_close(m[i, j], x @ x)


def test_layer_inputs_for_conv_match_weight_layout():
    conv = make_conv2d(3, 4, 3, 2, 1, True, {**W_ASYM, "n_fixed": 5}, 0)
    model = nn.Sequential(conv)
    x = torch.randn(2, 3, 8, 8)
    patches = layer_inputs(model, x, names=["0"], max_samples=10 ** 6)["0"]
    assert patches.shape == (2 * 4 * 4, 27)
    out = conv(x).detach().permute(0, 2, 3, 1).reshape(-1, 4).double()
    ref = patches @ effective_weight(conv).detach().reshape(4, -1).double().T + conv.bias.detach().double()
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_swap_cost_analysis_end_to_end():
    torch.manual_seed(0)
    x = torch.randn(500, 12)
    rows, mats = swap_cost_analysis(mlp(W_ASYM), x)
    assert [r["layer"] for r in rows] == ["layers.0", "layers.1"]
    for r in rows:
        assert 1 <= r["k"] <= r["fan_in"] and r["explained"] >= 0.9
        assert 0 <= r["swap_frac_negative"] <= 1 and r["fixed_fraction"] == pytest.approx(4 / r["fan_in"])
    assert mats["layers.0"].shape == (16, 16)
    assert len(swap_cost_long(mats["layers.0"], "layers.0", max_units=4)) == 16
    std_rows, std_mats = swap_cost_analysis(mlp(None), x)
    assert all(t.abs().max() < 1e-4 for t in std_mats.values())
    assert all(r["fixed_fraction"] == 0 for r in std_rows)


# --------------------------------------------------------------------------- activation matching
def test_matching_identity_is_optimal_when_b_is_a():
    torch.manual_seed(0)
    a = mlp()
    x = torch.randn(400, 12)
    rows = activation_matching_rows(a, a, x, n_random=20, seed=0)
    assert len(rows) == 2
    for r in rows:
        assert r["identity"] == pytest.approx(r["optimal"], abs=1e-6)
        assert r["identity"] == pytest.approx(1.0, abs=1e-4)
        assert r["identity_fraction"] == 1.0 and r["identity_normalized"] == pytest.approx(1.0, abs=1e-6)
        assert r["random_mean"] < 0.9


def test_matching_recovers_a_planted_permutation():
    torch.manual_seed(0)
    a = mlp()
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(5))
    sd = {k: v.clone() for k, v in a.state_dict().items()}
    for k in ("layers.0.weight", "layers.0.bias", "norms.0.weight", "norms.0.bias"):
        sd[k] = sd[k][perm]
    sd["layers.1.weight"] = sd["layers.1.weight"][:, perm]
    b = mlp()
    b.load_state_dict(sd)
    x = torch.randn(400, 12)
    torch.testing.assert_close(b(x), a(x), atol=1e-5, rtol=1e-5)
    corr = feature_correlations(a, b, x)[0]
    res = matching_objective(corr, n_random=10, seed=1)
    # B's unit j is A's unit perm[j], so the optimal match sends perm[j] -> j: π* = perm⁻¹
    assert torch.equal(res["permutation"], torch.argsort(perm))
    assert res["optimal"] == pytest.approx(1.0, abs=1e-4)
    assert res["identity"] < 0.9 and res["identity_fraction"] < 1


def test_matching_random_baseline_is_seeded():
    c = torch.randn(30, 30, generator=torch.Generator().manual_seed(0)).clamp(-1, 1)
    r1, r2, r3 = (matching_objective(c, 50, seed=s) for s in (0, 0, 1))
    assert r1["random_mean"] == r2["random_mean"] != r3["random_mean"]
    assert r1["optimal"] >= max(r1["identity"], r1["random_mean"])


def test_constant_units_get_zero_correlation():
    a = nn.Linear(3, 4)

    class M(nn.Module):
        def hidden_features(self, x):
            h = a(x)
            h[:, 0] = 1.0  # a constant unit
            return [h]

    c = feature_correlations(M(), M(), torch.randn(50, 3))[0]
    assert torch.all(c[0] == 0) and torch.all(c[:, 0] == 0)


# --------------------------------------------------------------------------- barriers
def test_regression_midpoint_barrier():
    assert regression_midpoint_barrier([0, 0.5, 1], [0.2, 0.9, 0.4]) == pytest.approx(0.5)
    assert regression_midpoint_barrier([1, 0, 0.5], [0.4, 0.2, 0.3]) == pytest.approx(-0.1)
    with pytest.raises(ValueError, match="0.5"):
        regression_midpoint_barrier([0, 1], [0.1, 0.2])


def test_path_barrier_row_classification_and_regression():
    cls = [{"lam": l, "split": "test", "loss": v, "acc": a} for l, v, a in
           ((0, 0.3, 0.9), (0.5, 0.8, 0.6), (1, 0.5, 0.8))]
    r = path_barrier_row(cls)
    assert r["loss_midpoint_barrier"] == pytest.approx(0.4) and r["regression_midpoint_barrier"] == pytest.approx(0.3)
    assert r["relative_accuracy_barrier"] == pytest.approx((0.6 - 0.9) / 0.9)
    reg = [{"lam": l, "split": "test", "loss": v, "acc": float("nan")} for l, v in ((0, 0.1), (0.5, 0.4), (1, 0.2))]
    r = path_barrier_row(reg)
    assert r["regression_midpoint_barrier"] == pytest.approx(0.2) and "relative_accuracy_barrier" not in r
