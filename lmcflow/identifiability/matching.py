"""Activation matching of two models' hidden units (``identifiability.parquet``).

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
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

from lmcflow.correlation import SIMILARITIES, feature_moments
from lmcflow.seeding import generator


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
