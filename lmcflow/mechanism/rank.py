"""Low rank of each hidden layer's weight (rank99, entropy effective rank) beside a seeded Gaussian matrix of the
same shape. The math: ``docs/mechanism.md``."""
from __future__ import annotations

import functools
import hashlib
import math

import torch
from torch import nn

from lmcflow.mechanism.common import DEFAULT_ENERGY
from lmcflow.models import MLP, VGG11, ResNet20
from lmcflow.seeding import generator

_RANK_CACHE: dict = {}
_RANK_CACHE_SIZE = 512


def rank_stats(weight: torch.Tensor, energy: float = DEFAULT_ENERGY) -> dict:
    """rank99 (k for ``energy`` of Σs²), its fraction of min(shape), entropy effective rank and its fraction.

    Memoised by the weight's bytes: every model enters n − 1 pairs of a pair block, and a permuted copy has the
    same singular values but other bytes (it is recomputed, correctly)."""
    w = weight.detach().reshape(weight.shape[0], -1)
    raw = w.contiguous().flatten().cpu().view(torch.uint8).numpy().tobytes()
    key = (hashlib.sha256(raw).hexdigest(), tuple(w.shape), str(w.dtype), float(energy))
    if key not in _RANK_CACHE:
        if len(_RANK_CACHE) >= _RANK_CACHE_SIZE:
            _RANK_CACHE.pop(next(iter(_RANK_CACHE)))
        _RANK_CACHE[key] = _rank_stats(w, float(energy))
    return dict(_RANK_CACHE[key])


def singular_values(w: torch.Tensor) -> torch.Tensor:
    """Singular values (descending, float64, on the CPU) of a 2-D matrix, as the square roots of the eigenvalues of
    its smaller Gram matrix (W Wᵀ or Wᵀ W) in float64 on the matrix's device: s² as rank99 uses them, 3–4x faster
    than an SVD on the CPU and a symmetric eigenproblem on a GPU. Eigenvalues below the Gram's rounding floor
    max(shape)·ε·λ_max count as 0 (singular values below ~1e-7·√max(shape)·s_max, which no relative rank here
    resolves; an exactly rank-deficient matrix keeps its rank)."""
    w = w.double()
    gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
    ev = torch.linalg.eigvalsh(gram).flip(0)
    floor = max(w.shape) * torch.finfo(torch.float64).eps * ev[0].clamp_min(0)
    return torch.where(ev > floor, ev, torch.zeros_like(ev)).sqrt().cpu()


def _rank_stats(w: torch.Tensor, energy: float) -> dict:
    r = min(w.shape)
    s = singular_values(w)
    if s.sum() == 0:
        return {"rank99": 0, "rank99_frac": float("nan"), "erank": float("nan"), "erank_rel": float("nan"),
                "min_dim": r}
    e = s.pow(2)
    cum = torch.cumsum(e, 0) / e.sum()
    # smallest k with cum[k-1] >= energy (tolerance for the rounding of the cumulative sum)
    k = int(torch.searchsorted(cum, torch.tensor([energy - 1e-12], dtype=torch.float64))[0]) + 1
    k = min(k, r)
    p = s / s.sum()
    p = p[p > 0]
    erank = float(torch.exp(-(p * p.log()).sum()))
    return {"rank99": k, "rank99_frac": k / r, "erank": erank, "erank_rel": erank / r, "min_dim": r}


def hidden_layer_weights(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(state_dict name, weight) of the layer producing each entry of ``hidden_features``."""
    if isinstance(model, MLP):
        return [(f"layers.{i}.weight", m.weight) for i, m in enumerate(model.layers)]
    if isinstance(model, VGG11):
        return [(f"convs.{i}.weight", m.weight) for i, m in enumerate(model.convs)]
    if isinstance(model, ResNet20):
        out = [("stem.weight", model.stem.weight)]
        for s, blocks in enumerate(model.stages):
            for b, block in enumerate(blocks):
                out.append((f"stages.{s}.{b}.conv1.weight", block.conv1.weight))
                out.append((f"stages.{s}.{b}.conv2.weight", block.conv2.weight))
        return out
    raise NotImplementedError(f"no hidden-layer weight list for {type(model).__name__}")


@functools.lru_cache(maxsize=256)
def _random_rank_reference(shape: tuple, energy: float, max_dim: int) -> tuple:
    rows, cols = int(shape[0]), int(math.prod(shape[1:]))
    scale = min(1.0, max_dim / max(rows, cols))
    rows, cols = max(1, round(rows * scale)), max(1, round(cols * scale))
    g = generator("mechanism-random-matrix", rows, cols)
    st = _rank_stats(torch.randn(rows, cols, generator=g, dtype=torch.float64), energy)
    return st["erank_rel"], st["rank99_frac"]


def random_rank_reference(shape: tuple, energy: float = DEFAULT_ENERGY, max_dim: int = 1024) -> dict:
    """erank_rel and rank99_frac of a seeded standard Gaussian matrix of ``shape`` (out, in·k·k), scaled
    down to at most ``max_dim`` rows and columns with the same aspect ratio."""
    erank_rel, rank99_frac = _random_rank_reference(tuple(int(d) for d in shape), float(energy), int(max_dim))
    return {"erank_rel_random": erank_rel, "rank99_frac_random": rank99_frac}


def weight_rank_rows(model_a: nn.Module, model_b: nn.Module, energy: float = DEFAULT_ENERGY) -> list[dict]:
    """Rows {layer, weight, rank99_{a,b}, rank99_frac_{a,b}, erank_{a,b}, erank_rel_{a,b}, min_dim, and the
    random-matrix references erank_rel_random, rank99_frac_random}."""
    rows = []
    for j, ((name, wa), (_, wb)) in enumerate(zip(hidden_layer_weights(model_a), hidden_layer_weights(model_b))):
        sa, sb = rank_stats(wa, energy), rank_stats(wb, energy)
        row = {"layer": j + 1, "weight": name, "min_dim": sa["min_dim"],
               **random_rank_reference(tuple(wa.shape), energy)}
        for key in ("rank99", "rank99_frac", "erank", "erank_rel"):
            row[f"{key}_a"], row[f"{key}_b"] = sa[key], sb[key]
        rows.append(row)
    return rows
