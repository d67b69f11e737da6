"""Streaming similarities between the hidden units of two models.

Shared by activation matching (alignment) and the identifiability metrics.
Convolutional features count every pixel as a sample. ``pearson``: the Pearson
correlation; constant units have no defined correlation, they get 0 so they neither
attract nor repel a match (the identifiability authors' "with zero for constant").
``dot_product``: the mean product of the raw activations, AᵀB / N (Git Re-Basin's
activation matching; the authors' ``DotProduct`` mode with normalised similarities).
"""
from __future__ import annotations

import torch
from torch import nn


class _Moments:
    def __init__(self):
        self.n = 0
        self.sa = self.sb = self.saa = self.sbb = self.sab = None

    def add(self, fa: torch.Tensor, fb: torch.Tensor) -> None:
        fa, fb = _as_samples(fa).double(), _as_samples(fb).double()
        if self.sa is None:
            self.sa, self.sb = fa.sum(0), fb.sum(0)
            self.saa, self.sbb = (fa * fa).sum(0), (fb * fb).sum(0)
            self.sab = fa.T @ fb
        else:
            self.sa += fa.sum(0)
            self.sb += fb.sum(0)
            self.saa += (fa * fa).sum(0)
            self.sbb += (fb * fb).sum(0)
            self.sab += fa.T @ fb
        self.n += fa.shape[0]

    def correlation(self, eps: float = 1e-12) -> torch.Tensor:
        n = self.n
        ma, mb = self.sa / n, self.sb / n
        cov = self.sab / n - torch.outer(ma, mb)
        va = (self.saa / n - ma * ma).clamp_min(0)
        vb = (self.sbb / n - mb * mb).clamp_min(0)
        denom = torch.sqrt(torch.outer(va, vb))
        corr = torch.where(denom > eps, cov / denom.clamp_min(eps), torch.zeros_like(cov))
        return corr.clamp(-1, 1).float()

    def dot_product(self) -> torch.Tensor:
        return (self.sab / self.n).float()

    def similarity(self, kind: str) -> torch.Tensor:
        if kind == "pearson":
            return self.correlation()
        if kind == "dot_product":
            return self.dot_product()
        raise ValueError(f"similarity {kind!r} is unknown; allowed: {', '.join(SIMILARITIES)}")


SIMILARITIES = ("pearson", "dot_product")


def _as_samples(f: torch.Tensor) -> torch.Tensor:
    """(N, C) or (N, C, H, W) -> (samples, C)."""
    if f.dim() == 2:
        return f
    return f.movedim(1, -1).reshape(-1, f.shape[1])


def _features(model: nn.Module, x: torch.Tensor, points) -> dict[str, list[torch.Tensor]]:
    """{point: features of every hidden layer}: one forward pass (``features_at``) where the model has it."""
    if tuple(points) == ("post_activation",):
        return {"post_activation": model.hidden_features(x)}
    if not hasattr(model, "features_at"):
        other = [p for p in points if p != "post_activation"]
        raise ValueError(f"{type(model).__name__} gives post-activation features only; feature point {other[0]!r} "
                         f"needs an MLP (analysis.matching_features)")
    return model.features_at(x, tuple(points))


@torch.no_grad()
def feature_moments(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, batch_size: int = 1000,
                    layers=None, points=("post_activation",)) -> dict[str, list[_Moments]]:
    """{feature point: [moments of each hidden layer]} of the two models' features on ``x`` (one pass)."""
    model_a.eval()
    model_b.eval()
    moments: dict[str, list[_Moments]] = {}
    for i in range(0, len(x), batch_size):
        fa_all = _features(model_a, x[i:i + batch_size], points)
        fb_all = _features(model_b, x[i:i + batch_size], points)
        for at in points:
            fa, fb = fa_all[at], fb_all[at]
            idx = range(len(fa)) if layers is None else layers
            ms = moments.setdefault(at, [_Moments() for _ in idx])
            for m, j in zip(ms, idx):
                m.add(fa[j].float(), fb[j].float())
    return moments


def feature_correlations(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor,
                         batch_size: int = 1000, layers=None) -> list[torch.Tensor]:
    """Pearson correlation matrix C[i, j] = corr(unit i of A, unit j of B) per hidden layer (post-activation).

    Uses ``model.hidden_features``; ``layers`` picks a subset of feature indices.
    """
    return [m.correlation() for m in feature_moments(model_a, model_b, x, batch_size, layers)["post_activation"]]
