"""Scalar metrics of LMC: barriers and temperature calibration.

Barrier definitions (values where larger is worse, e.g. loss or error):

* ``midpoint``        L(θ½) − ½(L_a + L_b)
* ``max_minus_mean``  max_λ L(θλ) − ½(L_a + L_b)            (Frankle et al., 2020)
* ``entezari``        max_λ [L(θλ) − ((1−λ)L_a + λL_b)]      (Entezari et al., 2022)

with θλ = (1−λ)θ_a + λθ_b, so λ = 0 is model A and λ = 1 is model B.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported lazily where needed
    import torch

BARRIER_DEFINITIONS = ("midpoint", "max_minus_mean", "entezari")


def barriers(lam, values) -> dict[str, float]:
    """All barrier definitions for one curve ``values`` sampled at ``lam`` (must hold 0, ½ and 1)."""
    lam = np.asarray(lam, dtype=float)
    v = np.asarray(values, dtype=float)
    order = np.argsort(lam)
    lam, v = lam[order], v[order]
    if not (np.isclose(lam[0], 0) and np.isclose(lam[-1], 1)):
        raise ValueError("the λ grid must include 0 and 1 (the endpoint models)")
    mid = np.flatnonzero(np.isclose(lam, 0.5))
    if mid.size == 0:
        raise ValueError("the λ grid must include 0.5 for the midpoint barrier")
    va, vb = v[0], v[-1]
    mean_end = 0.5 * (va + vb)
    return {
        "midpoint": float(v[mid[0]] - mean_end),
        "max_minus_mean": float(v.max() - mean_end),
        "entezari": float(np.max(v - ((1 - lam) * va + lam * vb))),
    }


def relative_accuracy_barrier(lam, acc) -> float:
    """(min_λ acc − max(acc_0, acc_1)) / max(acc_0, acc_1): ≤ 0, 0 means no drop."""
    lam = np.asarray(lam, float)
    acc = np.asarray(acc, float)[np.argsort(lam)]
    best_end = max(acc[0], acc[-1])
    return float((acc.min() - best_end) / best_end)


# torch is imported inside the functions that need it: the barrier formulas are used by the
# table and claim jobs, which must not pay torch's ~2.5 s import (lmcflow.jobs.report, lmcflow.jobs.figures).
def cross_entropy_at(logits: torch.Tensor, y: torch.Tensor, beta: float) -> float:
    import torch.nn.functional as F  # lazy: table and claim jobs use this module without torch

    return F.cross_entropy(logits.double() * beta, y).item()


def fit_inverse_temperature(logits: torch.Tensor, y: torch.Tensor,
                            log_bounds: tuple[float, float] = (-7.0, 7.0)) -> float:
    """β > 0 minimising CE(β·logits, y): one scalar, fitted in float64.

    CE(β z) is convex in β, so a bounded 1-D search over log β finds the global
    optimum; logits are computed once by the caller and reused.
    """
    import torch  # lazy: table and claim jobs use this module without torch
    from scipy.optimize import (
        minimize_scalar,  # lazy: scipy costs ~0.6 s of every job's start-up
    )

    # CE(βz, y) = β·mean_i(m_i − z_{i,y_i}) + mean_i log Σ_j exp(β(z_ij − m_i)), m_i = max_j z_ij: the
    # objective of F.cross_entropy(β z, y) (equal to ~1e-15), 3.5x cheaper per evaluation with the
    # shifts precomputed and the classes as rows.
    z = logits.detach().double()
    m = z.max(1).values
    shifted = (z - m[:, None]).t().contiguous()
    offset = (m - z.gather(1, y[:, None]).squeeze(1)).mean().item()

    def ce(t: float) -> float:
        beta = math.exp(t)
        return beta * offset + torch.exp(shifted * beta).sum(0).log().mean().item()

    res = minimize_scalar(ce, bounds=log_bounds, method="bounded", options={"xatol": 1e-7})
    return float(math.exp(res.x))
