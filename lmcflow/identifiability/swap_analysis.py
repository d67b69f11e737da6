"""Swap costs of every weight layer of a model (``swap_costs.parquet`` rows and the matrices for heatmaps):
each layer's inputs are collected, their principal subspace taken, and ``realization``'s costs computed on it.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lmcflow.identifiability.realization import (
    anisotropy,
    anisotropy_bound,
    masked_grams,
    realization_costs,
    ridge_post_activation_costs,
    ridge_realization_costs,
    ridge_summary,
    swap_costs,
    swap_summary,
)
from lmcflow.identifiability.subspaces import principal_components
from lmcflow.seeding import generator
from lmcflow.symmetry import SigmaGate, effective_weight, is_asymmetric


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


def swap_cost_long(t: torch.Tensor, layer: str, max_units: int | None = 64,
                   t_ridge: torch.Tensor | None = None) -> list[dict]:
    """Long-form rows (layer, i, j, T_ij, T^ridge_ij) of the leading ``max_units`` block, for heatmaps."""
    t = torch.as_tensor(t)
    n = t.shape[0] if max_units is None else min(max_units, t.shape[0])
    block = t[:n, :n].double().numpy()
    ridge = t_ridge[:n, :n].double().numpy() if t_ridge is not None else np.full((n, n), np.nan)
    return [{"layer": layer, "i": i, "j": j, "swap_cost": float(block[i, j]), "swap_cost_ridge": float(ridge[i, j])}
            for i in range(n) for j in range(n)]
