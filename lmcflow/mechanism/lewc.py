"""LEWC/LLFC (features of the merged model vs the endpoints' combination) and weak additivity of the activation,
per hidden layer and λ. The math: ``docs/mechanism.md``."""
from __future__ import annotations

import inspect
import math

import torch
from torch import nn

from lmcflow.mechanism.common import (
    interpolated_models,
    lam_cols,
    model_device,
    per_sample_cosine,
    row_cosine,
    shuffled_batches,
    unit_rows,
)


@torch.no_grad()  # forward passes only: no autograd graph to build and keep
def lewc_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lambdas, batch_size: int = 500,
              x_bn: torch.Tensor | None = None, shuffled: bool = True) -> list[dict]:
    """Rows {layer, lam_paper, lam_path, lewc_cos, lewc_cos_shuffled, llfc_cos} (``docs/mechanism.md`` §1);
    ``shuffled=False`` skips the null (NaN) and its forward passes."""
    model_a.eval()
    model_b.eval()
    lambdas = [float(v) for v in lambdas]
    models = interpolated_models(model_a, model_b, lambdas, x_bn)
    if x_bn is not None:  # endpoints get re-estimated statistics too, like every θ_λ
        model_a, model_b = interpolated_models(model_a, model_b, [1.0, 0.0], x_bn)
    dev = model_device(model_a)
    sums, rows_seen = None, None
    for xb, xp in shuffled_batches(x, batch_size, dev):
        fa, fb = model_a.hidden_features(xb), model_b.hidden_features(xb)
        fa_p, fb_p = (model_a.hidden_features(xp), model_b.hidden_features(xp)) if shuffled else (fa, fb)
        if sums is None:
            sums = torch.zeros(len(lambdas), len(fa), 3, dtype=torch.float64)
            rows_seen = torch.zeros(len(fa), dtype=torch.float64)
        for j, f in enumerate(fa):
            rows_seen[j] += len(unit_rows(f))
        for k, (lam, m) in enumerate(zip(lambdas, models)):
            for j, fl in enumerate(m.hidden_features(xb)):
                wa, wb = lam ** (j + 1), (1 - lam) ** (j + 1)
                lewc = wa * fa[j] + wb * fb[j]
                llfc = lam * fa[j] + (1 - lam) * fb[j]
                sums[k, j, 0] += row_cosine(fl, lewc).sum().cpu()
                if shuffled:
                    null = wa * fa[j] + wb * fb_p[j] if lam <= 0.5 else wa * fa_p[j] + wb * fb[j]
                    sums[k, j, 1] += row_cosine(fl, null).sum().cpu()
                sums[k, j, 2] += row_cosine(fl, llfc).sum().cpu()
    rows = []
    for k, lam in enumerate(lambdas):
        for j in range(sums.shape[1]):
            n = rows_seen[j]
            rows.append({"layer": j + 1, **lam_cols(lam), "lewc_cos": float(sums[k, j, 0] / n),
                         "lewc_cos_shuffled": float(sums[k, j, 1] / n) if shuffled else float("nan"),
                         "llfc_cos": float(sums[k, j, 2] / n)})
    return rows


def gaussian_weak_additivity(alpha: float, beta: float | None = None) -> float:
    """cos(ReLU(αa + βb), αReLU(a) + βReLU(b)) for independent standard Gaussian vectors, width → ∞."""
    beta = 1.0 - alpha if beta is None else beta
    if alpha < 0 or beta < 0 or alpha + beta == 0:
        raise ValueError(f"weights must be non-negative and not both zero, got α={alpha}, β={beta}")
    if alpha == 0 or beta == 0:
        return 1.0
    ss = math.sqrt(alpha ** 2 + beta ** 2)

    def kappa(rho):  # E[ReLU(u)ReLU(v)] for unit-variance u, v with correlation rho
        rho = max(-1.0, min(1.0, rho))
        return (math.sqrt(1 - rho * rho) + (math.pi - math.acos(rho)) * rho) / (2 * math.pi)

    e_uv = alpha * ss * kappa(alpha / ss) + beta * ss * kappa(beta / ss)
    e_uu = ss ** 2 / 2
    e_vv = (alpha ** 2 + beta ** 2) / 2 + alpha * beta / math.pi
    return e_uv / math.sqrt(e_uu * e_vv)


def gaussian_weak_additivity_t(alpha: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """``gaussian_weak_additivity`` elementwise for tensors of weights α, β ≥ 0 (1 where one of them is 0)."""
    alpha, beta = alpha.double(), beta.double()
    ss = (alpha ** 2 + beta ** 2).sqrt().clamp_min(torch.finfo(torch.float64).tiny)

    def kappa(rho):
        rho = rho.clamp(-1.0, 1.0)
        return ((1 - rho * rho).clamp_min(0).sqrt() + (math.pi - torch.acos(rho)) * rho) / (2 * math.pi)

    e_uv = alpha * ss * kappa(alpha / ss) + beta * ss * kappa(beta / ss)
    e_uu = ss ** 2 / 2
    e_vv = (alpha ** 2 + beta ** 2) / 2 + alpha * beta / math.pi
    out = e_uv / (e_uu * e_vv).clamp_min(torch.finfo(torch.float64).tiny).sqrt()
    return torch.where((alpha == 0) | (beta == 0), torch.ones_like(out), out)


def _supports_pre(model: nn.Module) -> bool:
    return "pre" in inspect.signature(model.hidden_features).parameters


@torch.no_grad()
def weak_additivity_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lambdas,
                         batch_size: int = 500) -> list[dict]:
    """Rows {layer, lam_paper, lam_path, weak_additivity, weak_additivity_shuffled, weak_additivity_lewc, the
    Gaussian references, and ``weak_additivity_reference``: the Gaussian reference at each input's own norm balance
    (λ‖z̃_A‖, (1 − λ)‖z̃_B‖), averaged over inputs}."""
    if not (_supports_pre(model_a) and _supports_pre(model_b)):
        raise NotImplementedError(f"{type(model_a).__name__}.hidden_features has no pre=True path; "
                                  f"weak additivity needs pre-activations (MLP, VGG-11, ResNet-20 have them)")
    model_a.eval()
    model_b.eval()
    act = getattr(model_a, "act", None) or nn.ReLU()
    lambdas = [float(v) for v in lambdas]
    dev = model_device(model_a)
    sums, rows_seen = None, None
    for xb, xp in shuffled_batches(x, batch_size, dev):
        za, zb = model_a.hidden_features(xb, pre=True), model_b.hidden_features(xb, pre=True)
        zb_p = model_b.hidden_features(xp, pre=True)
        if sums is None:
            sums = torch.zeros(len(lambdas), len(za), 4, dtype=torch.float64)
            rows_seen = torch.zeros(len(za), dtype=torch.float64)
        for j, (a, b, bp) in enumerate(zip(za, zb, zb_p)):
            depth = j + 1
            a, b, bp = unit_rows(a).double(), unit_rows(b).double(), unit_rows(bp).double()
            rows_seen[j] += len(a)
            ra, rb, rbp = act(a), act(b), act(bp)
            for k, lam in enumerate(lambdas):
                for c, (wa, wb) in enumerate(((lam, 1 - lam), (lam ** depth, (1 - lam) ** depth))):
                    sums[k, j, c] += per_sample_cosine(act(wa * a + wb * b), wa * ra + wb * rb).sum().cpu()
                sums[k, j, 2] += per_sample_cosine(act(lam * a + (1 - lam) * bp),
                                                   lam * ra + (1 - lam) * rbp).sum().cpu()
                # independent Gaussian vectors at this input's own norm balance λ‖z̃_A‖ : (1 − λ)‖z̃_B‖
                sums[k, j, 3] += gaussian_weak_additivity_t(lam * a.norm(dim=1), (1 - lam) * b.norm(dim=1)).sum().cpu()
    rows = []
    for k, lam in enumerate(lambdas):
        for j in range(sums.shape[1]):
            depth, n = j + 1, rows_seen[j]
            gl = (lam ** depth, (1 - lam) ** depth)
            rows.append({"layer": depth, **lam_cols(lam),
                         "weak_additivity": float(sums[k, j, 0] / n),
                         "weak_additivity_shuffled": float(sums[k, j, 2] / n),
                         "weak_additivity_lewc": float(sums[k, j, 1] / n),
                         "weak_additivity_gaussian": gaussian_weak_additivity(lam, 1 - lam),
                         "weak_additivity_reference": float(sums[k, j, 3] / n),
                         "weak_additivity_lewc_gaussian": (gaussian_weak_additivity(*gl) if sum(gl) > 0
                                                           else float("nan"))})
    return rows
