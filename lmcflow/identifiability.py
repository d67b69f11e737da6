"""Neuron-identifiability metrics (Bürgin, Herbst, Lin, Jegelka, 2026).

Rows returned here are plain dicts, ready for the tables
``identifiability.parquet`` (activation matching), ``swap_costs.parquet``
(realization / swap costs) and ``coherence.parquet``; callers add the study,
point and seed columns.

Activation matching
    C = Pearson correlation between the hidden units of A (rows) and B (columns)
    of one layer (``lmcflow.correlation``; constant units → 0; conv: every pixel a
    sample). π* = linear_sum_assignment(C, maximize=True). Reported: mean_i C[i, π*(i)]
    (``optimal``), mean_i C[i, i] (``identity``), the mean of mean_i C[i, π(i)] over
    ``n_random`` seeded random permutations (``random_mean``), and
    ``identity_normalized`` = (identity − random)/(optimal − random) ∈ (−∞, 1]
    (1: the identity is optimal, 0: no better than chance).

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

Subspace coherence
    ν(U) = max_i ‖Uᵀ e_i‖² for orthonormal U ∈ R^{d×k}; ν ∈ [k/d, 1].

Regression midpoint barrier
    MSE(θ_½) − max(MSE(θ_0), MSE(θ_1)).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import nn

from lmcflow.correlation import feature_correlations
from lmcflow.seeding import generator
from lmcflow.symmetry import effective_weight, is_asymmetric


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
                             seed: int = 0, batch_size: int = 1000, layers=None) -> list[dict]:
    """One row per hidden layer (``model.hidden_features`` index) of the identifiability table."""
    corrs = feature_correlations(model_a, model_b, x, batch_size=batch_size, layers=layers)
    idx = range(len(corrs)) if layers is None else layers
    rows = []
    for layer, c in zip(idx, corrs):
        r = matching_objective(c, n_random=n_random, seed=seed)
        r.pop("permutation")
        rows.append({"layer": int(layer), **r})
    return rows


# --------------------------------------------------------------------------- subspaces
def principal_subspace(x: torch.Tensor, var_threshold: float = 0.9, center: bool = True,
                       max_k: int | None = None) -> tuple[torch.Tensor, float]:
    """(U, explained): orthonormal D×k top principal directions reaching ``var_threshold`` of the variance."""
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
    return evecs[:, :k].contiguous(), float(ratio[k - 1])


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
def realization_costs(w_eff: torch.Tensor, mask: torch.Tensor, offset: torch.Tensor, u: torch.Tensor,
                      rtol: float = 1e-10, chunk_elems: int = 1 << 24) -> tuple[torch.Tensor, torch.Tensor]:
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
    s = torch.einsum("dk,nd,dl->nkl", u, d, u)  # S_i = Uᵀ diag(d_i) U
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


def swap_summary(t: torch.Tensor, m: torch.Tensor | None = None, r: torch.Tensor | None = None,
                 rel_tol: float = 1e-6) -> dict:
    """Off-diagonal statistics of a swap-cost matrix (and of M, R when given)."""
    t = torch.as_tensor(t).double()
    n = t.shape[0]
    off = ~torch.eye(n, dtype=torch.bool)
    vals = t[off]
    out = {"n_units": n, "swap_median": float(vals.median()) if n > 1 else float("nan"),
           "swap_mean": float(vals.mean()) if n > 1 else float("nan"),
           "swap_q10": float(torch.quantile(vals, 0.1)) if n > 1 else float("nan"),
           "swap_frac_negative": float((vals < 0).double().mean()) if n > 1 else float("nan")}
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
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
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


def swap_cost_analysis(model: nn.Module, x: torch.Tensor, names=None, var_threshold: float = 0.9,
                       max_samples: int = 20000, batch_size: int = 1000, seed: int = 0) -> tuple[list, dict]:
    """(rows, matrices): one ``swap_costs`` row per layer and {layer: T} for heatmaps.

    By default every linear / conv layer except the one named ``head`` (output
    units are not permutable).
    """
    inputs = layer_inputs(model, x, names, batch_size=batch_size, max_samples=max_samples, seed=seed)
    rows, mats = [], {}
    for name, mod in _weight_layers(model, names):
        u, explained = principal_subspace(inputs[name], var_threshold)
        mask, offset = layer_mask_offset(mod)
        m, r = realization_costs(effective_weight(mod), mask, offset, u)
        t = swap_costs(m)
        rows.append({"layer": name, "fan_in": int(u.shape[0]), "k": int(u.shape[1]), "explained": explained,
                     "input_coherence": float((u * u).sum(1).max()),
                     "fixed_fraction": float((mask == 0).double().mean()), **swap_summary(t, m, r)})
        mats[name] = t.float()
    return rows, mats


def swap_cost_long(t: torch.Tensor, layer: str, max_units: int | None = 64) -> list[dict]:
    """Long-form rows (layer, i, j, T_ij) of the leading ``max_units`` block, for heatmaps."""
    t = torch.as_tensor(t)
    n = t.shape[0] if max_units is None else min(max_units, t.shape[0])
    block = t[:n, :n].double().numpy()
    return [{"layer": layer, "i": i, "j": j, "swap_cost": float(block[i, j])} for i in range(n) for j in range(n)]


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
           "intrinsic_dimension",
           "subspace_coherence", "coherence_row", "realization_costs", "swap_costs", "swap_summary",
           "layer_inputs", "layer_mask_offset", "swap_cost_analysis", "swap_cost_long",
           "regression_midpoint_barrier", "path_barrier_row"]
