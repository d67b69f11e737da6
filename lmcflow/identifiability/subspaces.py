"""Principal subspaces of a layer's inputs, the data's intrinsic dimension and subspace coherence ν
(``coherence.parquet``).

ν(U) = max_i ‖Uᵀ e_i‖² for orthonormal U ∈ R^{d×k}; ν ∈ [k/d, 1].
"""
from __future__ import annotations

import torch


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
