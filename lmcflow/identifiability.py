"""Neuron-identifiability metrics (Bürgin, Herbst, Lin, Jegelka, 2026).

Rows returned here are plain dicts, ready for the tables
``identifiability.parquet`` (activation matching), ``swap_costs.parquet``
(realization / swap costs) and ``coherence.parquet``; callers add the study,
point and seed columns.

Activation matching
    C = the similarity between the hidden units of A (rows) and B (columns) of one
    layer (``lmcflow.correlation``; conv: every pixel a sample): ``pearson`` correlation
    (constant units → 0) or ``dot_product`` AᵀB/N, of the features at one point of the
    layer (``post_linear``, ``post_norm``, ``post_activation``; the identifiability
    authors' three matching modes, with their two similarities). π* =
    linear_sum_assignment(C, maximize=True). Reported: mean_i C[i, π*(i)] (``optimal``),
    mean_i C[i, i] (``identity``), the mean of mean_i C[i, π(i)] over ``n_random`` seeded
    random permutations (``random_mean``), and ``identity_normalized`` = (identity −
    random)/(optimal − random) ∈ (−∞, 1] (1: the identity is optimal, 0: no better than
    chance; scale-free, so the dot-product rows compare with the correlation rows).

Realization and swap costs (one linear / conv layer)
    U ∈ R^{D×k}: the top principal directions of the layer's inputs (centred PCA;
    conv: every input patch a sample) explaining ``var_threshold`` (90%) of the
    variance. For slot i with mask row d_i (1 = trainable) and offset row f_i, and
    neuron j with effective weight row w_j:
        S_i = (Uᵀ diag(d_i))(Uᵀ diag(d_i))ᵀ = Uᵀ diag(d_i) U,   v_i = Uᵀ f_i,   a_j = Uᵀ w_j,
        M_ij = (a_j − v_i)ᵀ S_i⁺ (a_j − v_i)
    is the least squared norm of trainable weights with which slot i realizes neuron
    j's function on span(U) (exact when a_j − v_i lies in range(S_i); the part outside
    is reported as the ``unrealizable`` fraction). The swap cost of exchanging i and j
    is T_ij = M_ij + M_ji − M_ii − M_jj (symmetric, zero diagonal; standard layers
    give T = 0). T_ij > 0: the current assignment is cheaper than the swap. The low tail of the
    off-diagonal T relative to the mean self cost m̄ = mean_i M_ii says how many swaps are cheap:
    ``swap_q10_relative`` = q10(T)/m̄ and ``swap_frac_cheap`` = share of T_ij < m̄ (a swap cheaper
    than realizing one neuron).

Realization cost by ridge regression (the authors' second estimator)
    Instead of the exact minimum norm on span(U), slot i fits neuron j's output on the
    data with a ridge penalty: min_w (1/β)·E_x[(h_i(x; w) − h_j(x))²] + ‖w‖², w the
    trainable weights of slot i (its fixed offsets kept), a free bias, the inputs
    projected on U (centred; the bias absorbs the mean). ``ridge_steps = 0``: h is the
    pre-activation, a linear ridge problem solved exactly: with Λ the input variances
    along U, G_i = Λ^½ S_i Λ^½ and g = (G_i + βI)⁻¹ Λ^½ (a_j − v_i), the cost is
    M^ridge_ij = gᵀ G_i g = ‖w*‖². As β → 0 it tends to M_ij when S_i is invertible
    (the data fit becomes exact); as β → ∞ to 0. ``ridge_steps > 0``: h is the
    post-activation output act(pre) (the authors' target, through a freshly
    initialised BatchNorm in eval mode, i.e. the identity), fitted by that many
    full-batch Adam steps from the linear solution (the authors: 3000 AdamW steps from
    the slot's own weights, lr 5e-3). T^ridge is built from M^ridge like T from M.

Subspace coherence and anisotropy
    ν(U) = max_i ‖Uᵀ e_i‖² for orthonormal U ∈ R^{d×k}; ν ∈ [k/d, 1]. Anisotropy of a
    masked layer (the authors' ``evaluate_anisotropy``): with p the share of trainable
    entries, ‖S_i − p·I‖₂ per neuron (0 for a layer without a mask); the matrix-Bernstein
    level it stays below with probability 1 − δ for a random Bernoulli(p) mask is
    (2/3)·p·ν·log(2k/δ) + sqrt(p(1−p))·sqrt(ν)·sqrt(2·log(2k/δ)) (their
    ``compute_anisotropy_bound``, with their b_d = p).

Regression midpoint barrier
    MSE(θ_½) − max(MSE(θ_0), MSE(θ_1)).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import nn

from lmcflow.correlation import SIMILARITIES, feature_moments
from lmcflow.seeding import generator
from lmcflow.symmetry import SigmaGate, effective_weight, is_asymmetric


# --------------------------------------------------------------------------- activation matching
def matching_objective(corr: torch.Tensor, n_random: int = 100, seed: int = 0) -> dict:
    """Optimal, identity and random-permutation activation-matching objectives of one layer."""
    c = corr.detach().double().cpu()
    n = c.shape[0]
    if c.dim() != 2 or c.shape[1] != n:
        raise ValueError(f"matching_objective: expected a square correlation matrix, got {tuple(c.shape)}")
    rows, cols = linear_sum_assignment(c.numpy(), maximize=True)
    perm = torch.as_tensor(cols)[np.argsort(rows)]
    optimal = float(c[torch.arange(n), perm].mean())
    identity = float(torch.diagonal(c).mean())
    if n_random > 0:
        g = generator("matching-random", seed)
        perms = torch.stack([torch.randperm(n, generator=g) for _ in range(n_random)])  # (R, n)
        vals = c.gather(1, perms.T).mean(0)  # c[i, perm_r[i]] averaged over i
        random_mean, random_std = float(vals.mean()), float(vals.std()) if n_random > 1 else 0.0
    else:
        random_mean = random_std = float("nan")
    denom = optimal - random_mean
    return {"n_units": n, "optimal": optimal, "identity": identity, "random_mean": random_mean,
            "random_std": random_std, "identity_gap": optimal - identity,
            "identity_normalized": (identity - random_mean) / denom if denom > 1e-12 else float("nan"),
            "identity_fraction": float((perm == torch.arange(n)).double().mean()),
            "permutation": perm}


def activation_matching_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, n_random: int = 100,
                             seed: int = 0, batch_size: int = 1000, layers=None, features=("post_activation",),
                             similarities=("pearson",)) -> list[dict]:
    """One row per hidden layer (``model.hidden_features`` index) × feature point × similarity of the
    identifiability table."""
    unknown = [s for s in similarities if s not in SIMILARITIES]
    if unknown:
        raise ValueError(f"similarity {unknown[0]!r} is unknown; allowed: {', '.join(SIMILARITIES)}")
    moments = feature_moments(model_a, model_b, x, batch_size=batch_size, layers=layers, points=tuple(features))
    rows = []
    for at in features:
        idx = range(len(moments[at])) if layers is None else layers
        for layer, m in zip(idx, moments[at]):
            for sim in similarities:
                r = matching_objective(m.similarity(sim), n_random=n_random, seed=seed)
                r.pop("permutation")
                rows.append({"layer": int(layer), "feature": at, "similarity": sim, **r})
    return rows


# --------------------------------------------------------------------------- subspaces
def principal_subspace(x: torch.Tensor, var_threshold: float = 0.9, center: bool = True,
                       max_k: int | None = None) -> tuple[torch.Tensor, float]:
    """(U, explained): orthonormal D×k top principal directions reaching ``var_threshold`` of the variance."""
    u, _, explained = principal_components(x, var_threshold, center, max_k)
    return u, explained


def principal_components(x: torch.Tensor, var_threshold: float = 0.9, center: bool = True,
                         max_k: int | None = None) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(U, variances, explained): ``principal_subspace`` plus the input variance along each column of U."""
    if not 0 < var_threshold <= 1:
        raise ValueError(f"var_threshold must be in (0, 1], got {var_threshold}")
    x = x.detach().double().reshape(len(x), -1)
    if center:
        x = x - x.mean(0, keepdim=True)
    cov = x.T @ x / max(1, len(x))
    evals, evecs = torch.linalg.eigh(cov)
    evals, evecs = evals.flip(0).clamp_min(0), evecs.flip(1)
    total = float(evals.sum())
    if total <= 0:
        raise ValueError("principal_subspace: the inputs have zero variance")
    ratio = torch.cumsum(evals, 0) / total
    k = int(torch.searchsorted(ratio, torch.tensor(var_threshold - 1e-12, dtype=ratio.dtype)).item()) + 1
    k = min(k, x.shape[1]) if max_k is None else min(k, max_k, x.shape[1])
    return evecs[:, :k].contiguous(), evals[:k].contiguous(), float(ratio[k - 1])


def intrinsic_dimension(x: torch.Tensor, var_threshold: float = 0.9) -> int:
    return principal_subspace(x, var_threshold)[0].shape[1]


def subspace_coherence(u: torch.Tensor, atol: float = 1e-6) -> float:
    """ν(U) = max_i ‖Uᵀe_i‖² = the largest squared row norm of orthonormal U (d×k)."""
    u = torch.as_tensor(u).double()
    if u.dim() != 2:
        raise ValueError(f"subspace_coherence: U must be a d×k matrix, got shape {tuple(u.shape)}")
    gram = u.T @ u
    if not torch.allclose(gram, torch.eye(u.shape[1], dtype=u.dtype), atol=atol):
        raise ValueError("subspace_coherence: the columns of U are not orthonormal")
    return float((u * u).sum(1).max())


def coherence_row(u: torch.Tensor) -> dict:
    u = torch.as_tensor(u)
    d, k = u.shape
    return {"d": int(d), "k": int(k), "nu": subspace_coherence(u), "nu_min": k / d}


# --------------------------------------------------------------------------- realization / swap costs
def masked_grams(mask: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """S_i = Uᵀ diag(d_i) U for every output row i of a mask (conv rows flattened): (n, k, k) float64."""
    u = torch.as_tensor(u).double().cpu()
    d = mask.detach().double().reshape(mask.shape[0], -1).cpu()
    return torch.einsum("dk,nd,dl->nkl", u, d, u)


def realization_costs(w_eff: torch.Tensor, mask: torch.Tensor, offset: torch.Tensor, u: torch.Tensor,
                      rtol: float = 1e-10, chunk_elems: int = 1 << 24,
                      s: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, R): realization cost M_ij of neuron j's function in slot i, and the unrealizable residual.

    Rows of ``w_eff``, ``mask``, ``offset`` are output neurons (conv weights are
    flattened over in·k·k); ``u`` is D×k with orthonormal columns. R_ij is the
    squared norm of the part of a_j − v_i outside range(S_i) (0 when realizable).
    """
    w = w_eff.detach().double().reshape(w_eff.shape[0], -1).cpu()
    d = mask.detach().double().reshape(w.shape).cpu()
    f = offset.detach().double().reshape(w.shape).cpu()
    u = torch.as_tensor(u).double().cpu()
    n, dim = w.shape
    if u.shape[0] != dim:
        raise ValueError(f"realization_costs: U has {u.shape[0]} rows but the weight rows have {dim} entries")
    a = w @ u  # (n, k)
    v = f @ u  # (n, k)
    s = masked_grams(d, u) if s is None else s  # S_i = Uᵀ diag(d_i) U
    s_pinv = torch.linalg.pinv(s, hermitian=True, rtol=rtol)
    proj = s @ s_pinv  # projector onto range(S_i)
    k = u.shape[1]
    m_out = torch.empty(n, n, dtype=torch.float64)
    r_out = torch.empty(n, n, dtype=torch.float64)
    step = max(1, chunk_elems // max(1, n * k))
    eye = torch.eye(k, dtype=torch.float64)
    for i0 in range(0, n, step):
        sl = slice(i0, min(n, i0 + step))
        diff = a[None, :, :] - v[sl, None, :]  # (c, n, k): a_j − v_i
        m_out[sl] = torch.einsum("cjk,ckl,cjl->cj", diff, s_pinv[sl], diff)
        resid = torch.einsum("ckl,cjl->cjk", eye - proj[sl], diff)
        r_out[sl] = (resid * resid).sum(-1)
    return m_out, r_out


def swap_costs(m: torch.Tensor) -> torch.Tensor:
    """T_ij = M_ij + M_ji − M_ii − M_jj."""
    m = torch.as_tensor(m).double()
    diag = torch.diagonal(m)
    return m + m.T - diag[:, None] - diag[None, :]


def ridge_realization_costs(w_eff: torch.Tensor, mask: torch.Tensor, offset: torch.Tensor, u: torch.Tensor,
                            variances: torch.Tensor, beta: float, s: torch.Tensor | None = None,
                            return_solution: bool = False):
    """M^ridge_ij: slot i fitting neuron j's pre-activation by ridge regression on the data (module doc).

    ``variances``: the input variance along each column of ``u`` (``principal_components``). With
    ``return_solution`` also the solutions g_ij ∈ R^k ((n, n, k); w = D_i U Λ^½ g_ij) and G ((n, k, k)).
    """
    if not beta > 0:
        raise ValueError(f"the ridge parameter β must be > 0, got {beta}")
    w = w_eff.detach().double().reshape(w_eff.shape[0], -1).cpu()
    f = offset.detach().double().reshape(w.shape).cpu()
    u = torch.as_tensor(u).double().cpu()
    root = torch.as_tensor(variances).double().cpu().clamp_min(0).sqrt()
    s = masked_grams(mask, u) if s is None else s
    g_mat = root[None, :, None] * s * root[None, None, :]  # G_i = Λ^½ S_i Λ^½
    evals, q = torch.linalg.eigh(g_mat)  # (n, k), (n, k, k)
    evals = evals.clamp_min(0)
    a, v = (w @ u) * root, (f @ u) * root  # Λ^½ a_j, Λ^½ v_i
    c = torch.einsum("ikm,ijk->ijm", q, a[None, :, :] - v[:, None, :])  # Qᵢᵀ Λ^½ (a_j − v_i)
    m = (c * c * (evals / (evals + beta) ** 2)[:, None, :]).sum(-1)
    if not return_solution:
        return m
    g = torch.einsum("ikm,ijm->ijk", q, c / (evals + beta)[:, None, :])
    return m, g, g_mat


def ridge_post_activation_costs(z: torch.Tensor, w_eff: torch.Tensor, bias: torch.Tensor | None,
                                mask: torch.Tensor, offset: torch.Tensor, u: torch.Tensor, mean: torch.Tensor,
                                variances: torch.Tensor, beta: float, activation, steps: int, lr: float = 1e-2,
                                chunk: int = 16, s: torch.Tensor | None = None, device=None) -> torch.Tensor:
    """M^ridge_ij fitting neuron j's *post-activation* output act(pre_j) with slot i (module doc).

    ``z``: the layer inputs' coordinates on U (centred, (N, k)); ``mean``: the inputs' mean (D,). Each pair's
    trainable weights w = D_i U Λ^½ g (g ∈ R^k, ‖w‖² = gᵀ G_i g) and bias start at the linear ridge solution
    and take ``steps`` full-batch Adam steps on (1/β)·mean_x (act(pre_i) − act(pre_j))² + gᵀ G_i g; the
    pairs are independent problems, optimised ``chunk`` slots at a time. On a CUDA ``device`` the steps run there
    in fp32 (the linear start is computed in fp64 on the CPU).
    """
    m_lin, g0, g_mat = ridge_realization_costs(w_eff, mask, offset, u, variances, beta, s=s, return_solution=True)
    if steps <= 0:
        return m_lin
    w = w_eff.detach().double().reshape(w_eff.shape[0], -1).cpu()
    f = offset.detach().double().reshape(w.shape).cpu()
    u = torch.as_tensor(u).double().cpu()
    root = torch.as_tensor(variances).double().cpu().clamp_min(0).sqrt()
    zt = (torch.as_tensor(z).double().cpu() / root.clamp_min(1e-300))  # whitened coordinates: z = Λ^½ z̃
    b = torch.zeros(w.shape[0], dtype=torch.float64) if bias is None else bias.detach().double().cpu()
    mu = torch.as_tensor(mean).double().cpu()
    a_t, v_t = (w @ u) * root, (f @ u) * root  # target and offset coefficients on z̃
    c_j = w @ mu + b  # neuron j's pre-activation at the mean input
    dev = torch.device(device) if device is not None else torch.device("cpu")
    dtype = torch.float32 if dev.type == "cuda" else torch.float64
    zt, a_t, v_t, c_j, g_mat, g0 = (t.to(dev, dtype) for t in (zt, a_t, v_t, c_j, g_mat, g0))
    if isinstance(activation, nn.Module):
        activation = activation.to(dev)
    with torch.no_grad():
        target = activation(zt @ a_t.T + c_j)  # (N, n)
    n = w.shape[0]
    out = torch.empty(n, n, dtype=torch.float64)
    for i0 in range(0, n, chunk):
        sl = slice(i0, min(n, i0 + chunk))
        gm = g_mat[sl]  # (c, k, k)
        g = g0[sl].clone().requires_grad_(True)  # (c, n, k)
        bias_fit = c_j[None, :].expand(gm.shape[0], n).clone().requires_grad_(True)  # (c, n)
        opt = torch.optim.Adam([g, bias_fit], lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            coef = torch.einsum("ckl,cjl->cjk", gm, g) + v_t[sl, None, :]  # G_i g + Λ^½ v_i
            pred = activation(torch.einsum("nk,cjk->ncj", zt, coef) + bias_fit[None])
            fit = ((pred - target[:, None, :]) ** 2).mean(0) / beta
            norm = torch.einsum("cjk,ckl,cjl->cj", g, gm, g)
            (fit + norm).sum().backward()
            opt.step()
        with torch.no_grad():
            out[sl] = torch.einsum("cjk,ckl,cjl->cj", g, gm, g).double().cpu()
    return out


def anisotropy(mask: torch.Tensor, u: torch.Tensor, s: torch.Tensor | None = None) -> tuple[torch.Tensor, float]:
    """(‖S_i − p·I‖₂ per neuron, p): the deviation of each row's masked Gram matrix from its mean (module doc)."""
    p = float(mask.detach().double().mean())
    s = masked_grams(mask, u) if s is None else s
    eig = torch.linalg.eigvalsh(s)
    return (eig - p).abs().amax(-1), p


def anisotropy_bound(p: float, nu: float, k: int, delta: float = 0.05) -> float:
    """Matrix-Bernstein level of ‖S_i − p·I‖₂ for a Bernoulli(p) mask, exceeded with probability ≤ δ."""
    log_term = math.log(2 * k / delta)
    return 2 / 3 * p * nu * log_term + math.sqrt(p * (1 - p)) * math.sqrt(nu) * math.sqrt(2 * log_term)


def swap_summary(t: torch.Tensor, m: torch.Tensor | None = None, r: torch.Tensor | None = None,
                 rel_tol: float = 1e-6) -> dict:
    """Off-diagonal statistics of a swap-cost matrix (and of M, R when given)."""
    t = torch.as_tensor(t).double()
    n = t.shape[0]
    off = ~torch.eye(n, dtype=torch.bool)
    vals = t[off]
    # a swap counts as negative beyond rounding noise: T of a standard layer is 0 up to ~1e-16 of the costs
    scale = max(float(t.abs().max()) if n else 0.0, float(torch.as_tensor(m).abs().max()) if m is not None else 0.0)
    out = {"n_units": n, "swap_median": float(vals.median()) if n > 1 else float("nan"),
           "swap_mean": float(vals.mean()) if n > 1 else float("nan"),
           "swap_q10": float(torch.quantile(vals, 0.1)) if n > 1 else float("nan"),
           "swap_frac_negative": float((vals < -1e-9 * scale).double().mean()) if n > 1 else float("nan")}
    if m is not None:
        m = torch.as_tensor(m).double()
        self_cost = torch.diagonal(m)
        out["self_cost_mean"] = float(self_cost.mean())
        scale = out["self_cost_mean"]
        positive = scale > 0 and n > 1
        out["swap_median_relative"] = out["swap_median"] / scale if positive else float("nan")
        # the low tail relative to the neurons' own realization cost: where cheap swaps show up
        out["swap_q10_relative"] = out["swap_q10"] / scale if positive else float("nan")
        out["swap_frac_cheap"] = float((vals < scale).double().mean()) if positive else float("nan")
        if r is not None:
            r = torch.as_tensor(r).double()
            scale = (m.abs() + r).clamp_min(1e-300)
            out["frac_unrealizable"] = float(((r / scale) > rel_tol)[off].double().mean()) if n > 1 else 0.0
    return out


def _weight_layers(model: nn.Module, names=None) -> list[tuple[str, nn.Module]]:
    """Linear / conv layers: ``names`` None = every one but the head, ``"all"`` = every one, or a list of names."""
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    if names == "all":
        return layers
    if names is None:
        return [(n, m) for n, m in layers if n != "head"]
    wanted = list(names)
    found = dict(layers)
    missing = [n for n in wanted if n not in found]
    if missing:
        raise ValueError(f"no linear/conv layer named {missing[0]!r}; have: {', '.join(found)}")
    return [(n, found[n]) for n in wanted]


@torch.no_grad()
def layer_inputs(model: nn.Module, x: torch.Tensor, names=None, batch_size: int = 1000,
                 max_samples: int = 20000, seed: int = 0) -> dict[str, torch.Tensor]:
    """Inputs seen by each linear / conv layer on data ``x``, as (samples, fan_in) float64 on CPU.

    Conv inputs are unfolded into patches (one sample per output pixel) matching
    ``weight.reshape(out, -1)``; at most ``max_samples`` patches are kept (seeded).
    """
    layers = _weight_layers(model, names)
    store: dict[str, list] = {n: [] for n, _ in layers}
    g = generator("layer-inputs", seed)

    def hook_for(name, mod):
        def hook(_m, inputs):
            h = inputs[0].detach()
            if isinstance(mod, nn.Conv2d):
                h = F.unfold(h, mod.kernel_size, dilation=mod.dilation, padding=mod.padding, stride=mod.stride)
                h = h.transpose(1, 2).reshape(-1, h.shape[1])
                per_batch = max(1, max_samples * batch_size // max(1, len(x)))
                if len(h) > per_batch:
                    h = h[torch.randperm(len(h), generator=g)[:per_batch].to(h.device)]
            store[name].append(h.double().cpu())
        return hook

    handles = [m.register_forward_pre_hook(hook_for(n, m)) for n, m in layers]
    was_training = model.training
    model.eval()
    try:
        for i in range(0, len(x), batch_size):
            model(x[i:i + batch_size])
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return {n: torch.cat(v)[:max_samples] if v else torch.empty(0) for n, v in store.items()}


def layer_mask_offset(module: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """(D, offset) of a layer; standard layers have D = 1 and no offset."""
    if is_asymmetric(module):
        return module.mask, module.offset
    w = module.weight
    return torch.ones_like(w), torch.zeros_like(w)


def _layer_activation(model: nn.Module, name: str):
    """The per-unit nonlinearity after a layer, for the post-activation ridge target (identity for the head and
    where the layer's nonlinearity is not per unit, e.g. the σ-asymmetric gate)."""
    if name == "head":
        return lambda t: t
    prefix, _, idx = name.rpartition(".")
    gates = getattr(model, "gates", None)
    if prefix == "layers" and gates is not None and isinstance(gates[int(idx)], SigmaGate):
        return lambda t: t
    act = getattr(model, "act", None)
    return act if act is not None else (lambda t: t)


def swap_cost_analysis(model: nn.Module, x: torch.Tensor, names=None, var_threshold: float = 0.9,
                       max_samples: int = 20000, batch_size: int = 1000, seed: int = 0,
                       ridge_beta: float | None = None, ridge_steps: int = 0, ridge_lr: float = 1e-2,
                       anisotropy_delta: float = 0.05, device=None) -> tuple[list, dict]:
    """(rows, matrices): one ``swap_costs`` row per layer and {layer: (T, T^ridge or None)} for heatmaps.

    ``names``: None = every linear / conv layer except the one named ``head`` (output units are not
    permutable), ``"all"`` = every one (the authors' heatmaps include the output layer), or a list of names.
    Each row also holds the coherence ν and the anisotropy of the layer's input subspace and, with
    ``ridge_beta``, the ridge-regression estimate beside the closed form.
    """
    inputs = layer_inputs(model, x, names, batch_size=batch_size, max_samples=max_samples, seed=seed)
    rows, mats = [], {}
    for name, mod in _weight_layers(model, names):
        h = inputs[name]
        u, variances, explained = principal_components(h, var_threshold)
        mask, offset = layer_mask_offset(mod)
        s = masked_grams(mask, u)
        m, r = realization_costs(effective_weight(mod), mask, offset, u, s=s)
        t = swap_costs(m)
        nu = float((u * u).sum(1).max())
        aniso, p = anisotropy(mask, u, s=s)
        row = {"layer": name, "fan_in": int(u.shape[0]), "k": int(u.shape[1]), "explained": explained,
               "input_coherence": nu, "input_coherence_min": float(u.shape[1] / u.shape[0]),
               "fixed_fraction": float((mask == 0).double().mean()), "mask_mean": p,
               "anisotropy_mean": float(aniso.mean()), "anisotropy_max": float(aniso.max()),
               "anisotropy_bound": anisotropy_bound(p, nu, int(u.shape[1]), anisotropy_delta),
               **swap_summary(t, m, r)}
        t_ridge = None
        if ridge_beta is not None:
            if isinstance(mod, nn.Conv2d) and ridge_steps > 0:
                raise ValueError(f"{name}: the post-activation ridge estimate (analysis.ridge_steps > 0) is for "
                                 f"linear layers; conv layers take ridge_steps: 0")
            if ridge_steps > 0:
                mean = h.mean(0)
                m_ridge = ridge_post_activation_costs((h - mean) @ u, effective_weight(mod), mod.bias, mask, offset,
                                                      u, mean, variances, ridge_beta, _layer_activation(model, name),
                                                      ridge_steps, lr=ridge_lr, s=s, device=device)
            else:
                m_ridge = ridge_realization_costs(effective_weight(mod), mask, offset, u, variances, ridge_beta, s=s)
            t_ridge = swap_costs(m_ridge)
            row.update(ridge_summary(t_ridge, m_ridge, t))
        rows.append(row)
        mats[name] = (t.float(), None if t_ridge is None else t_ridge.float())
    return rows, mats


def ridge_summary(t_ridge: torch.Tensor, m_ridge: torch.Tensor, t: torch.Tensor) -> dict:
    """The ridge estimate's swap-cost statistics and its rank agreement with the closed form (off-diagonal)."""
    from scipy.stats import spearmanr

    base = swap_summary(t_ridge, m_ridge)
    n = t.shape[0]
    off = ~torch.eye(n, dtype=torch.bool)
    a, b = t.double()[off].numpy(), t_ridge.double()[off].numpy()
    rho = float(spearmanr(a, b).statistic) if n > 2 and np.ptp(a) > 0 and np.ptp(b) > 0 else float("nan")
    return {"self_cost_mean_ridge": base["self_cost_mean"], "swap_median_ridge": base["swap_median"],
            "swap_q10_ridge": base["swap_q10"], "swap_frac_negative_ridge": base["swap_frac_negative"],
            "swap_q10_relative_ridge": base["swap_q10_relative"], "ridge_closed_form_spearman": rho}


def swap_cost_long(t: torch.Tensor, layer: str, max_units: int | None = 64,
                   t_ridge: torch.Tensor | None = None) -> list[dict]:
    """Long-form rows (layer, i, j, T_ij, T^ridge_ij) of the leading ``max_units`` block, for heatmaps."""
    t = torch.as_tensor(t)
    n = t.shape[0] if max_units is None else min(max_units, t.shape[0])
    block = t[:n, :n].double().numpy()
    ridge = t_ridge[:n, :n].double().numpy() if t_ridge is not None else np.full((n, n), np.nan)
    return [{"layer": layer, "i": i, "j": j, "swap_cost": float(block[i, j]), "swap_cost_ridge": float(ridge[i, j])}
            for i in range(n) for j in range(n)]


# --------------------------------------------------------------------------- barriers
def regression_midpoint_barrier(lam, mse) -> float:
    """MSE(θ_½) − max(MSE(θ_0), MSE(θ_1)); the λ grid must hold 0, ½ and 1."""
    lam = np.asarray(lam, dtype=float)
    v = np.asarray(mse, dtype=float)
    def at(x):
        hit = np.flatnonzero(np.isclose(lam, x))
        if hit.size == 0:
            raise ValueError(f"the λ grid must include {x} for the regression midpoint barrier")
        return v[hit[0]]
    return float(at(0.5) - max(at(0.0), at(1.0)))


def path_barrier_row(path_rows: list[dict], split: str = "test") -> dict:
    """Barrier summary of ``merging.evaluate_path`` rows for one split (classification or regression)."""
    from lmcflow.metrics import barriers, relative_accuracy_barrier

    rows = sorted((r for r in path_rows if r["split"] == split), key=lambda r: r["lam"])
    if not rows:
        raise ValueError(f"no path rows for split {split!r}")
    lam = [r["lam"] for r in rows]
    loss = [r["loss"] for r in rows]
    out = {"split": split, "loss_midpoint_barrier": barriers(lam, loss)["midpoint"],
           "loss_max_minus_mean": barriers(lam, loss)["max_minus_mean"],
           "regression_midpoint_barrier": regression_midpoint_barrier(lam, loss),
           "loss_0": loss[0], "loss_1": loss[-1]}
    acc = [r["acc"] for r in rows]
    if all(a == a for a in acc):  # classification
        out.update(acc_0=acc[0], acc_1=acc[-1], acc_mid=float(acc[int(np.argmin(np.abs(np.asarray(lam) - 0.5)))]),
                   relative_accuracy_barrier=relative_accuracy_barrier(lam, acc),
                   error_midpoint_barrier=barriers(lam, [1 - a for a in acc])["midpoint"])
    return out


def lmc_summary_row(path_rows: list[dict], split: str) -> dict:
    """Wide summary of one ``merging.evaluate_path`` curve (one split) for ``identifiability_lmc``.

    Barrier definitions as ``lmcflow.metrics.barriers`` (midpoint, max_minus_mean, entezari) on
    error = 1 − acc and on the loss; ``relative_accuracy_barrier`` =
    (min_λ acc − max(acc_a, acc_b)) / max(acc_a, acc_b). Regression curves (acc NaN) give NaN
    accuracy columns.
    """
    from lmcflow.metrics import barriers, relative_accuracy_barrier

    rows = sorted((r for r in path_rows if r["split"] == split), key=lambda r: r["lam"])
    if not rows:
        raise ValueError(f"no path rows for split {split!r}")
    lam = np.asarray([r["lam"] for r in rows], dtype=float)
    loss = np.asarray([r["loss"] for r in rows], dtype=float)
    acc = np.asarray([r["acc"] for r in rows], dtype=float)
    mid = int(np.argmin(np.abs(lam - 0.5)))
    nan = float("nan")
    lb = barriers(lam, loss)
    out = {"split": split, "loss_a": float(loss[0]), "loss_b": float(loss[-1]), "loss_mid": float(loss[mid]),
           **{f"loss_barrier_{k}": v for k, v in lb.items()}}
    if np.all(np.isfinite(acc)):
        eb = barriers(lam, 1.0 - acc)
        out.update(acc_a=float(acc[0]), acc_b=float(acc[-1]), acc_mid=float(acc[mid]), acc_min=float(acc.min()),
                   relative_accuracy_barrier=relative_accuracy_barrier(lam, acc),
                   **{f"error_barrier_{k}": v for k, v in eb.items()})
    else:
        out.update(acc_a=nan, acc_b=nan, acc_mid=nan, acc_min=nan, relative_accuracy_barrier=nan,
                   **{f"error_barrier_{k}": nan for k in lb})
    return out


__all__ = ["lmc_summary_row", "matching_objective", "activation_matching_rows", "principal_subspace",
           "principal_components", "intrinsic_dimension", "subspace_coherence", "coherence_row", "masked_grams",
           "realization_costs", "swap_costs", "swap_summary", "ridge_realization_costs",
           "ridge_post_activation_costs", "ridge_summary", "anisotropy", "anisotropy_bound", "layer_inputs",
           "layer_mask_offset", "swap_cost_analysis", "swap_cost_long", "regression_midpoint_barrier",
           "path_barrier_row"]
