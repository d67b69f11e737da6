"""What the mechanism metrics share: the paper's interpolation (λ = weight on θ_A), per-sample cosines, sample and
unit permutations (the same-run nulls), and the perturbed copy of A. The math: ``docs/mechanism.md``."""
from __future__ import annotations

import copy

import torch
from torch import nn

from lmcflow.evaluation import reset_bn_stats
from lmcflow.merging import interpolate_state
from lmcflow.seeding import generator

DEFAULT_ACTIVE_THRESHOLD = 1e-3
DEFAULT_ENERGY = 0.99


def paper_interpolation(sd_a: dict, sd_b: dict, lam: float) -> dict:
    """θ_λ = λ θ_a + (1 − λ) θ_b (paper convention; = interpolate_state(sd_a, sd_b, 1 − λ))."""
    return interpolate_state(sd_b, sd_a, lam)


def per_sample_cosine(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """cos between rows of u and v (flattened per sample), float64; 1 if both are 0, 0 if one is."""
    u = u.flatten(1).double()
    v = v.flatten(1).double()
    nu, nv = u.norm(dim=1), v.norm(dim=1)
    dot = (u * v).sum(1)
    denom = nu * nv
    cos = torch.where(denom > 0, dot / denom.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(dot))
    return torch.where((nu == 0) & (nv == 0), torch.ones_like(cos), cos)


def unit_rows(t: torch.Tensor) -> torch.Tensor:
    """A feature tensor as (samples, units): (N, D) unchanged; (N, C, H, W) as N·H·W rows of C channels."""
    if t.dim() <= 2:
        return t.reshape(len(t), -1)
    return t.movedim(1, -1).reshape(-1, t.shape[1])


def row_cosine(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``per_sample_cosine`` of the unit vectors of every row (``unit_rows``): one cosine per input, or per
    pixel of every input for conv features."""
    return per_sample_cosine(unit_rows(u), unit_rows(v))


def model_device(model: nn.Module) -> torch.device:
    p = next(iter(model.state_dict().values()), None)
    return p.device if p is not None else torch.device("cpu")


def batches(x: torch.Tensor, batch_size: int, device):
    for i in range(0, len(x), batch_size):
        yield x[i:i + batch_size].to(device)


def sample_permutation(n: int, seed: int = 0) -> torch.Tensor:
    """π: the fixed seeded permutation of n samples that breaks the pairing of samples between A and B."""
    return torch.randperm(n, generator=generator("mechanism-shuffled-pairing", seed, n))


def unit_permutation(n: int, role: str, layer: int, seed: int = 0) -> torch.Tensor:
    """P_A / P_B (``role`` "a" / "b"): a fixed seeded permutation of the n input units of hidden layer ``layer``;
    Q_A / Q_B (``role`` "a-out" / "b-out"): of its n output units."""
    return torch.randperm(n, generator=generator("mechanism-self-permutation", seed, role, layer, n))


def shuffled_batches(x: torch.Tensor, batch_size: int, device, seed: int = 0):
    """(x batch, π(x) batch) pairs over the samples in order."""
    perm = sample_permutation(len(x), seed)
    for i in range(0, len(x), batch_size):
        yield x[i:i + batch_size].to(device), x[perm[i:i + batch_size]].to(device)


def lam_cols(lam: float) -> dict:
    return {"lam_paper": float(lam), "lam_path": float(1.0 - lam)}


def interpolated_models(model_a, model_b, lambdas, x_bn=None) -> list[nn.Module]:
    sd_a, sd_b = model_a.state_dict(), model_b.state_dict()
    out = []
    for lam in lambdas:
        m = copy.deepcopy(model_a)
        m.load_state_dict(paper_interpolation(sd_a, sd_b, float(lam)))
        if x_bn is not None:
            reset_bn_stats(m, x_bn.to(model_device(m)))
        m.eval()
        out.append(m)
    return out


def perturbed_state(model_a: nn.Module, model_b: nn.Module, seed=0) -> dict:
    """θ_R = θ_A + δ: every parameter tensor k moved by δ_k = g_k ‖θ_B,k − θ_A,k‖/‖g_k‖, g_k standard Gaussian
    from ``generator("mechanism-perturbation", seed, k)``; buffers (BatchNorm statistics, masks) are A's."""
    params = dict(model_a.named_parameters())
    sd_b = model_b.state_dict()
    out = {}
    for name, value in model_a.state_dict().items():
        if name not in params or not value.is_floating_point():
            out[name] = value.clone()
            continue
        g = torch.randn(value.shape, generator=generator("mechanism-perturbation", seed, name),
                        dtype=torch.float64)
        size = (sd_b[name].double() - value.double()).norm().cpu()
        gn = g.norm()
        delta = g * (size / gn) if gn > 0 else torch.zeros_like(g)
        out[name] = (value.double() + delta.to(value.device)).to(value.dtype)
    return out


def perturbed_copy(model_a: nn.Module, model_b: nn.Module, seed=0) -> nn.Module:
    """Model R (``perturbed_state``): A moved as far as B, into a random direction."""
    r = copy.deepcopy(model_a)
    r.load_state_dict(perturbed_state(model_a, model_b, seed))
    return r.eval()
