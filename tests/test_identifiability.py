"""Identifiability metrics: activation matching, realization / swap costs, coherence, barriers."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lmcflow.correlation import feature_correlations
from lmcflow.identifiability import (
    activation_matching_rows,
    anisotropy,
    anisotropy_bound,
    coherence_row,
    layer_inputs,
    matching_objective,
    path_barrier_row,
    principal_components,
    principal_subspace,
    realization_costs,
    regression_midpoint_barrier,
    ridge_post_activation_costs,
    ridge_realization_costs,
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
    t, t_ridge = mats["layers.0"]
    assert t.shape == (16, 16) and t_ridge is None
    assert len(swap_cost_long(t, "layers.0", max_units=4)) == 16
    std_rows, std_mats = swap_cost_analysis(mlp(None), x)
    assert all(t.abs().max() < 1e-4 for t, _ in std_mats.values())
    assert all(r["fixed_fraction"] == 0 and r["anisotropy_max"] < 1e-9 for r in std_rows)
    # every layer, the output layer too, with the ridge estimate beside the closed form
    rows, mats = swap_cost_analysis(mlp(W_ASYM), x, names="all", ridge_beta=0.01)
    assert [r["layer"] for r in rows] == ["layers.0", "layers.1", "head"] and mats["head"][0].shape == (3, 3)
    assert all(-1 <= r["ridge_closed_form_spearman"] <= 1 for r in rows[:2])
    long = swap_cost_long(mats["layers.0"][0], "layers.0", 4, mats["layers.0"][1])
    assert all(r["swap_cost_ridge"] == r["swap_cost_ridge"] for r in long)  # not NaN


# --------------------------------------------------------------------------- ridge-regression realization costs
def _random_layer(seed=2, n=6, d=10, k=4, density=0.7):
    g = torch.Generator().manual_seed(seed)
    u = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))[0]
    w = torch.randn(n, d, generator=g, dtype=torch.float64)
    mask = (torch.rand(n, d, generator=g) < density).double()
    mask[:, :k] = 1.0  # every row keeps k trainable coordinates in general position: S_i invertible
    offset = (1 - mask) * torch.randn(n, d, generator=g, dtype=torch.float64)
    return u, w, mask, offset


def test_ridge_cost_tends_to_the_closed_form_on_a_full_rank_subspace():
    u, w, mask, offset = _random_layer()
    m, _ = realization_costs(w, mask, offset, u)
    variances = torch.tensor([3.0, 2.0, 1.0, 0.5], dtype=torch.float64)
    for beta, tol in ((1e-3, 2e-2), (1e-7, 1e-5)):
        m_ridge = ridge_realization_costs(w, mask, offset, u, variances, beta)
        assert (m_ridge <= m + 1e-9).all()  # the penalised fit never needs more norm than the exact one
        torch.testing.assert_close(m_ridge, m, rtol=tol, atol=tol)
    assert ridge_realization_costs(w, mask, offset, u, variances, 1e6).abs().max() < 1e-4  # β → ∞: no fit
    with pytest.raises(ValueError, match="β"):
        ridge_realization_costs(w, mask, offset, u, variances, 0.0)


def test_ridge_solution_minimises_the_penalised_objective():
    """The closed-form ridge weights beat perturbed ones on (1/β)·E[(xᵀ(D w + f_i − w_j))²] + ‖w‖²."""
    u, w, mask, offset = _random_layer(seed=3)
    variances = torch.tensor([2.0, 1.0, 0.7, 0.3], dtype=torch.float64)
    beta = 0.5
    m_ridge, g, _ = ridge_realization_costs(w, mask, offset, u, variances, beta, return_solution=True)
    cov = u @ torch.diag(variances) @ u.T
    i, j = 2, 4
    w_star = mask[i] * (u @ (variances.sqrt() * g[i, j]))  # w = D_i U Λ^½ g

    def objective(wt):
        r = mask[i] * wt + offset[i] - w[j]
        return r @ cov @ r / beta + wt @ wt

    torch.testing.assert_close(w_star @ w_star, m_ridge[i, j])
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        assert objective(w_star) <= objective(w_star + 1e-2 * mask[i] * torch.randn(10, generator=gen,
                                                                                    dtype=torch.float64))


def test_post_activation_ridge_fit():
    u, w, mask, offset = _random_layer(seed=4)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(300, 4, generator=g, dtype=torch.float64) @ u.T * 2 + 0.3  # inputs on span(U), mean 0.3
    mean = x.mean(0)
    z = (x - mean) @ u
    variances = z.var(0, unbiased=False)
    bias = torch.randn(6, generator=g, dtype=torch.float64)
    lin = ridge_realization_costs(w, mask, offset, u, variances, 0.1)
    # an identity "activation": the linear ridge solution is already optimal, the steps keep it
    same = ridge_post_activation_costs(z, w, bias, mask, offset, u, mean, variances, 0.1, lambda t: t, steps=20,
                                       lr=1e-4)
    torch.testing.assert_close(same, lin, rtol=1e-2, atol=1e-3)
    # GELU: fitting through the nonlinearity changes the costs, stays symmetric in use (T = M + Mᵀ − …)
    gelu = ridge_post_activation_costs(z, w, bias, mask, offset, u, mean, variances, 0.1, torch.nn.GELU(),
                                       steps=30)
    assert gelu.shape == (6, 6) and torch.isfinite(gelu).all() and (gelu >= 0).all()
    assert not torch.allclose(gelu, lin, rtol=1e-3)
    t = swap_costs(gelu)
    torch.testing.assert_close(t, t.T)


# --------------------------------------------------------------------------- anisotropy
def test_anisotropy_hand_made_and_bound():
    u = torch.eye(3, dtype=torch.float64)[:, :2]  # coordinate-aligned subspace: ν = 1
    mask = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])  # p = 2/3
    a, p = anisotropy(mask, u)
    assert p == pytest.approx(2 / 3)
    # S_0 = diag(1, 0) -> max |eig − p| = 2/3; S_1 = I -> 1/3
    torch.testing.assert_close(a, torch.tensor([2 / 3, 1 / 3], dtype=torch.float64))
    ones, p1 = anisotropy(torch.ones(4, 3), u)
    assert p1 == 1.0 and ones.abs().max() < 1e-12  # no mask, no anisotropy
    assert anisotropy_bound(1.0, 1.0, 2) == pytest.approx(2 / 3 * math.log(80))  # σ_d = 0 for p = 1
    lo, hi = anisotropy_bound(0.3, 0.1, 5), anisotropy_bound(0.3, 1.0, 5)
    assert 0 < lo < hi  # more coherent subspaces fluctuate more under a random mask


def test_principal_components_variances():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20000, 3, generator=g) * torch.tensor([3.0, 1.0, 0.1])
    u, var, explained = principal_components(x, 0.95)
    assert u.shape == (3, 2) and explained >= 0.95
    torch.testing.assert_close(var, torch.tensor([9.0, 1.0], dtype=torch.float64), rtol=0.05, atol=0.05)


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


def planted_pair():
    """(A, B, perm, x): B is A with its first hidden layer's units relabelled by ``perm`` (the same function)."""
    torch.manual_seed(0)
    a = mlp()
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(5))
    sd = {k: v.clone() for k, v in a.state_dict().items()}
    for k in ("layers.0.weight", "layers.0.bias", "norms.0.weight", "norms.0.bias"):
        sd[k] = sd[k][perm]
    sd["layers.1.weight"] = sd["layers.1.weight"][:, perm]
    b = mlp()
    b.load_state_dict(sd)
    return a, b, perm, torch.randn(400, 12)


def test_matching_recovers_a_planted_permutation():
    a, b, perm, x = planted_pair()
    torch.testing.assert_close(b(x), a(x), atol=1e-5, rtol=1e-5)
    corr = feature_correlations(a, b, x)[0]
    res = matching_objective(corr, n_random=10, seed=1)
    # B's unit j is A's unit perm[j], so the optimal match sends perm[j] -> j: π* = perm⁻¹
    assert torch.equal(res["permutation"], torch.argsort(perm))
    assert res["optimal"] == pytest.approx(1.0, abs=1e-4)
    assert res["identity"] < 0.9 and res["identity_fraction"] < 1


@pytest.mark.parametrize("feature", ["post_linear", "post_norm", "post_activation"])
@pytest.mark.parametrize("similarity", ["pearson", "dot_product"])
def test_every_matching_mode_recovers_a_planted_permutation(feature, similarity):
    a, b, perm, x = planted_pair()
    rows = activation_matching_rows(a, b, x, n_random=10, features=[feature], similarities=[similarity])
    assert [(r["layer"], r["feature"], r["similarity"]) for r in rows] == [(0, feature, similarity),
                                                                           (1, feature, similarity)]
    first = rows[0]
    assert first["identity_fraction"] < 0.5  # B's units are shuffled ...
    assert first["optimal"] > first["identity"] and first["identity_normalized"] < 0.5
    from lmcflow.correlation import feature_moments

    sim = feature_moments(a, b, x, points=(feature,))[feature][0].similarity(similarity)
    res = matching_objective(sim, n_random=0)
    assert torch.equal(res["permutation"], torch.argsort(perm))  # ... and the mode finds them


def test_feature_points_of_the_mlp():
    torch.manual_seed(0)
    a = mlp()
    x = torch.randn(5, 12)
    lin, norm, act = (a.hidden_features(x, at=p) for p in ("post_linear", "post_norm", "post_activation"))
    torch.testing.assert_close(lin[0], a.layers[0](x))
    torch.testing.assert_close(norm[0], a.norms[0](lin[0]))
    torch.testing.assert_close(act[0], nn.functional.gelu(norm[0]))
    torch.testing.assert_close(a.hidden_features(x, pre=True)[1], norm[1])
    with pytest.raises(ValueError, match="post_gate"):
        a.hidden_features(x, at="post_gate")
    conv = build_model(ModelSpec("vgg11", (3, 32, 32), 10, width=0.0625))
    with pytest.raises(ValueError, match="matching_features"):
        activation_matching_rows(conv, conv, torch.randn(4, 3, 32, 32), features=["post_norm"])


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
    cls = [{"lam": lam, "split": "test", "loss": v, "acc": a} for lam, v, a in
           ((0, 0.3, 0.9), (0.5, 0.8, 0.6), (1, 0.5, 0.8))]
    r = path_barrier_row(cls)
    assert r["loss_midpoint_barrier"] == pytest.approx(0.4) and r["regression_midpoint_barrier"] == pytest.approx(0.3)
    assert r["relative_accuracy_barrier"] == pytest.approx((0.6 - 0.9) / 0.9)
    reg = [{"lam": lam, "split": "test", "loss": v, "acc": float("nan")} for lam, v in ((0, 0.1), (0.5, 0.4), (1, 0.2))]
    r = path_barrier_row(reg)
    assert r["regression_midpoint_barrier"] == pytest.approx(0.2) and "relative_accuracy_barrier" not in r
