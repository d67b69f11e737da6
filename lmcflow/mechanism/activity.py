"""Neuron activity: each unit's second moment, the active units of each model and their overlap beside chance.
The math: ``docs/mechanism.md``."""
from __future__ import annotations

import torch
from torch import nn

from lmcflow.mechanism.common import DEFAULT_ACTIVE_THRESHOLD, batches, model_device


@torch.no_grad()  # forward passes only: no autograd graph to build and keep
def second_moments(model: nn.Module, x: torch.Tensor, batch_size: int = 500) -> list[torch.Tensor]:
    """Per unit m_i = mean over samples (and pixels) of f_{l,i}², one float64 CPU tensor per layer."""
    model.eval()
    dev = model_device(model)
    sums, count = None, None
    for xb in batches(x, batch_size, dev):
        feats = model.hidden_features(xb)
        if sums is None:
            sums = [torch.zeros(f.shape[1], dtype=torch.float64) for f in feats]
            count = [0] * len(feats)
        for j, f in enumerate(feats):
            f = f.double()
            sums[j] += f.pow(2).sum(dim=[d for d in range(f.dim()) if d != 1]).cpu()
            count[j] += f.numel() // f.shape[1]
    return [s / c for s, c in zip(sums, count)]


def active_units(m2: torch.Tensor, threshold: float = DEFAULT_ACTIVE_THRESHOLD) -> torch.Tensor:
    """Boolean mask: m_i > threshold · max_j m_j (all False for an all-zero layer)."""
    top = m2.max()
    if top <= 0:
        return torch.zeros_like(m2, dtype=torch.bool)
    return m2 > threshold * top


def independent_jaccard(n_a: int, n_b: int, n: int) -> float:
    """E|A ∩ B| / E|A ∪ B| for sets of n_a and n_b of n units placed independently at random (NaN if both empty)."""
    inter = n_a * n_b / n if n else 0.0
    union = n_a + n_b - inter
    return inter / union if union > 0 else float("nan")


def overlap(a: torch.Tensor, b: torch.Tensor, threshold: float) -> dict:
    """The active units of two layers' second moments at one τ and their Jaccard index beside chance."""
    act_a, act_b = active_units(a, threshold), active_units(b, threshold)
    union = int((act_a | act_b).sum())
    return {"n_units": len(a), "n_active_a": int(act_a.sum()), "n_active_b": int(act_b.sum()),
            "frac_active_a": float(act_a.float().mean()), "frac_active_b": float(act_b.float().mean()),
            "active_jaccard": int((act_a & act_b).sum()) / union if union else float("nan"),
            "active_jaccard_independent": independent_jaccard(int(act_a.sum()), int(act_b.sum()), len(a)),
            "active_threshold": threshold}


def neuron_activity_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor,
                         threshold: float = DEFAULT_ACTIVE_THRESHOLD, batch_size: int = 500) -> list[dict]:
    """Rows {layer, n_units, n_active_{a,b}, frac_active_{a,b}, active_jaccard, active_jaccard_independent,
    m2_mean_{a,b}, m2_max_{a,b}} at τ = ``threshold`` (``docs/mechanism.md`` §5)."""
    ma, mb = second_moments(model_a, x, batch_size), second_moments(model_b, x, batch_size)
    return [{"layer": j + 1, **overlap(a, b, threshold), "m2_mean_a": float(a.mean()), "m2_mean_b": float(b.mean()),
             "m2_max_a": float(a.max()), "m2_max_b": float(b.max())} for j, (a, b) in enumerate(zip(ma, mb))]


def active_overlap_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, thresholds,
                        batch_size: int = 500) -> list[dict]:
    """The τ sweep (table ``active_overlap``): rows {layer, active_threshold, n_units, n_active_{a,b},
    frac_active_{a,b}, active_jaccard, active_jaccard_independent} for every τ in ``thresholds``, from one pass
    over the inputs per model."""
    ma, mb = second_moments(model_a, x, batch_size), second_moments(model_b, x, batch_size)
    return [{"layer": j + 1, **overlap(a, b, float(tau))}
            for tau in sorted({float(t) for t in thresholds}) for j, (a, b) in enumerate(zip(ma, mb))]
