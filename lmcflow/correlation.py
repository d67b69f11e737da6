"""Streaming Pearson correlation between the hidden units of two models.

Shared by activation matching (alignment) and the identifiability metrics.
Convolutional features count every pixel as a sample. Constant units have no
defined correlation; they get 0 so they neither attract nor repel a match.
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


def _as_samples(f: torch.Tensor) -> torch.Tensor:
    """(N, C) or (N, C, H, W) -> (samples, C)."""
    if f.dim() == 2:
        return f
    return f.movedim(1, -1).reshape(-1, f.shape[1])


@torch.no_grad()
def feature_correlations(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor,
                         batch_size: int = 1000, layers=None) -> list[torch.Tensor]:
    """Pearson correlation matrix C[i, j] = corr(unit i of A, unit j of B) per hidden layer.

    Uses ``model.hidden_features``; ``layers`` picks a subset of feature indices.
    """
    model_a.eval()
    model_b.eval()
    moments: list[_Moments] | None = None
    for i in range(0, len(x), batch_size):
        fa = model_a.hidden_features(x[i:i + batch_size])
        fb = model_b.hidden_features(x[i:i + batch_size])
        idx = range(len(fa)) if layers is None else layers
        if moments is None:
            moments = [_Moments() for _ in idx]
        for m, j in zip(moments, idx):
            m.add(fa[j].float(), fb[j].float())
    return [m.correlation() for m in moments]
