"""Realization and swap costs of one linear / conv layer, their ridge-regression estimate, and the anisotropy of
a masked layer (the formulas; ``swap_analysis`` applies them to a model's layers).

Details: docs/internals.md, "`lmcflow.identifiability.realization`".
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn


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


def ridge_summary(t_ridge: torch.Tensor, m_ridge: torch.Tensor, t: torch.Tensor) -> dict:
    """The ridge estimate's swap-cost statistics and its rank agreement with the closed form (off-diagonal)."""
    from scipy.stats import spearmanr  # scipy.stats costs ~0.3 s; only ridge summaries need it

    base = swap_summary(t_ridge, m_ridge)
    n = t.shape[0]
    off = ~torch.eye(n, dtype=torch.bool)
    a, b = t.double()[off].numpy(), t_ridge.double()[off].numpy()
    rho = float(spearmanr(a, b).statistic) if n > 2 and np.ptp(a) > 0 and np.ptp(b) > 0 else float("nan")
    return {"self_cost_mean_ridge": base["self_cost_mean"], "swap_median_ridge": base["swap_median"],
            "swap_q10_ridge": base["swap_q10"], "swap_frac_negative_ridge": base["swap_frac_negative"],
            "swap_q10_relative_ridge": base["swap_q10_relative"], "ridge_closed_form_spearman": rho}
