r"""Mechanism metrics of the width paper (LEWC, weak additivity, reciprocal orthogonality, low rank).

All metrics are computed on test inputs ``x`` for two (already aligned) models A
and B, per hidden layer ``l = 1…L`` (1-based: ``l`` is the position in
``model.hidden_features(x)``, and the exponent in LEWC). Functions return plain
row dicts; ``layer_metrics`` joins them into one row per (layer, λ) for
``layer_metrics.parquet``.

Interpolation convention (read this before joining with path tables)
--------------------------------------------------------------------
This module uses the paper's convention, **λ is the weight on θ_a**:

    θ_λ = λ θ_a + (1 − λ) θ_b          (so λ = 1 is model A, λ = 0 is model B)

``lmcflow.merging.interpolate_state(sd_a, sd_b, t)`` returns (1 − t) θ_a + t θ_b,
i.e. its ``t`` (the ``lam`` column of the path tables) is the weight on θ_b; the
paper's θ_λ is ``interpolate_state(sd_a, sd_b, 1 − λ)`` (computed here as
``interpolate_state(sd_b, sd_a, λ)``, exact at both ends). Every row carries both
``lam_paper`` = λ (weight on θ_a) and ``lam_path`` = 1 − λ (weight on θ_b, the
same point in path-table coordinates); there is deliberately no bare ``lam``.
BatchNorm running statistics of θ_λ are interpolated unless ``x_bn`` is given,
in which case they are re-estimated on ``x_bn`` for every θ_λ *and* for the
endpoint models whose features enter the LEWC/LLFC targets (as ``evaluate_path``
treats every point of the curve alike; the caller's models are not modified).
The other metrics use the endpoint models as given.

Notation: f_l(θ) ∈ R^{n_l} post-activation features of hidden layer l (conv
features flattened per sample to C·H·W), z̃_l(θ) the pre-activations (the input
of the activation function, i.e. after the norm layer), W_l the weight of the
layer producing hidden layer l, z_{l−1}(θ) its input (f_{l−1}; the flattened
input x for l = 1; for VGG the max-pooled f_{l−1} where a pool follows). The
per-sample cosine is cos(u, v) = <u, v> / (‖u‖‖v‖), with cos = 1 when both
vectors are exactly 0 and cos = 0 when only one is. "mean_x" is the mean over
the samples of ``x``.

Same-run nulls. π is a fixed seeded permutation of the samples (``sample_permutation``): evaluating
one model at π(x) while the other stays at x breaks the pairing of samples between A and B and keeps
everything else (both models, both feature distributions) — the independent baseline of a cosine
between the two models' features. P_A, P_B are fixed seeded permutations of a layer's input units
(``unit_permutation``): P_A z_A is model A's own representation at random unit positions.

1. LEWC and LLFC (``lewc_rows``; any model with ``hidden_features``)
       lewc_cos          = mean_x cos( f_l(θ_λ)(x), λ^l f_l(θ_a)(x) + (1 − λ)^l f_l(θ_b)(x) )
       lewc_cos_shuffled = the same with the features of the model with the larger LEWC weight at π(x):
                           f_l(θ_b)(π x) for λ ≤ ½, f_l(θ_a)(π x) for λ > ½ (shuffling the minor term
                           would leave the target almost unchanged, and the null uninformative)
       llfc_cos          = mean_x cos( f_l(θ_λ), λ f_l(θ_a) + (1 − λ) f_l(θ_b) )
   For ResNet-20 l is the index in hidden_features, which is not the depth of a
   residual path; LEWC's exponent is only meaningful for plain nets.

2. Weak additivity of the activation σ (ReLU in the paper; the model's own
   ``act`` is used) on the endpoint models' pre-activations
   (``weak_additivity_rows``; needs ``hidden_features(x, pre=True)``, i.e. MLP):
       weak_additivity      = mean_x cos( σ(λ z̃_a + (1−λ) z̃_b), λ σ(z̃_a) + (1−λ) σ(z̃_b) )
       weak_additivity_lewc = mean_x cos( σ(λ^l z̃_a + (1−λ)^l z̃_b), λ^l σ(z̃_a) + (1−λ)^l σ(z̃_b) )
       weak_additivity_shuffled = weak_additivity with z̃_b(π x) in place of z̃_b(x)
   (the second is the form LEWC needs at layer l; the third its empirical independent baseline).
   Reference for independent standard Gaussian vectors a, b (large-width limit of the per-sample cosine,
   ``gaussian_weak_additivity(α, β)`` with α = λ, β = 1 − λ or α = λ^l, β = (1−λ)^l):
       s = αa + βb,  σ_s² = α² + β²,  κ(ρ) = (√(1−ρ²) + (π − arccos ρ) ρ) / (2π)
       E[ReLU(s)²] = σ_s²/2,   E[ReLU(s)ReLU(a)] = σ_s κ(α/σ_s)
       E[(αReLU(a) + βReLU(b))²] = (α² + β²)/2 + αβ/π
       ref = (α σ_s κ(α/σ_s) + β σ_s κ(β/σ_s)) / sqrt(σ_s²/2 · ((α²+β²)/2 + αβ/π))
   which at λ = ½ is (3/4 + 1/π)/sqrt(1 + 1/π) = 0.93044.

3. Reciprocal orthogonality (``reciprocal_orthogonality_rows``; MLP and VGG-11),
   with W z the linear part of the layer (``layer(z) − layer(0)``, no bias), norms
   pooled over the samples (‖·‖_F over samples × units, so all-zero samples do
   not produce 0/0):
       cross_ratio_a = ‖W_a z_b‖_F / ‖W_a z_a‖_F,    cross_ratio_b = ‖W_b z_a‖_F / ‖W_b z_b‖_F
       cross_cos     = mean_x cos( W_a z_b + W_b z_a, W_a z_a + W_b z_b )
       cross_ratio_permuted_a = ‖W_a P_A z_a‖_F / ‖W_a z_a‖_F,   cross_ratio_permuted_b = ‖W_b P_B z_b‖_F / ‖W_b z_b‖_F
   At l = 1 both models read the same input, so the ratios are 1 and cross_cos
   is 1 by definition (layer 1 has no cross term in LEWC). The permuted ratios are
   each model against a randomly relabelled copy of itself: the orthogonality that
   the model's low rank alone produces for inputs with its own statistics.

4. Low rank (``weight_rank_rows``): for each model's W_l reshaped to
   (out, in·k·k) with singular values s_1 ≥ … ≥ s_r, r = min(shape):
       rank99      = min{k : Σ_{i≤k} s_i² ≥ 0.99 Σ_i s_i²},   rank99_frac = rank99 / r
       erank       = exp(−Σ_i p_i log p_i),  p_i = s_i / Σ_j s_j   (Roy & Vetterli 2007; 0 log 0 = 0)
       erank_rel   = erank / r
   (``energy`` changes 0.99.) The stored ``.weight`` is used, not an effective
   masked weight of a symmetry-breaking layer. Reference (``random_rank_reference``):
       erank_rel_random, rank99_frac_random = the same for a seeded standard Gaussian
       matrix of W_l's shape (scaled down to at most 1024 rows and columns with the same
       aspect ratio, where the relative ranks are within ~1% of their Marchenko–Pastur
       limits): the rank of an unstructured weight, e.g. an untrained network's.

5. Neuron activity (``neuron_activity_rows``): per unit i of layer l the
   uncentred second moment m_i = mean_x f_{l,i}(x)² (conv: also over pixels), in
   each model. Unit i is *active* when m_i > τ · max_j m_j (τ = ``threshold``,
   default 1e-3: RMS activity above ~3.2 % of the layer's most active unit).
       active_jaccard = |act_a ∩ act_b| / |act_a ∪ act_b|   (NaN if both empty)
   computed on unit indices, so B must already be aligned to A. Rows also carry
   n_active_{a,b}, frac_active_{a,b} and the mean/max of m in each model.
"""
from __future__ import annotations

import copy
import inspect
import math

import torch
import torch.nn.functional as F
from torch import nn

from lmcflow.merging import interpolate_state
from lmcflow.seeding import generator
from lmcflow.training import reset_bn_stats

DEFAULT_ACTIVE_THRESHOLD = 1e-3
DEFAULT_ENERGY = 0.99


# --------------------------------------------------------------------------- helpers
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


def _model_device(model: nn.Module) -> torch.device:
    p = next(iter(model.state_dict().values()), None)
    return p.device if p is not None else torch.device("cpu")


def _batches(x: torch.Tensor, batch_size: int, device):
    for i in range(0, len(x), batch_size):
        yield x[i:i + batch_size].to(device)


def sample_permutation(n: int, seed: int = 0) -> torch.Tensor:
    """π: the fixed seeded permutation of n samples that breaks the pairing of samples between A and B."""
    return torch.randperm(n, generator=generator("mechanism-shuffled-pairing", seed, n))


def unit_permutation(n: int, role: str, layer: int, seed: int = 0) -> torch.Tensor:
    """P_A / P_B (``role`` "a" / "b"): a fixed seeded permutation of the n input units of hidden layer ``layer``."""
    return torch.randperm(n, generator=generator("mechanism-self-permutation", seed, role, layer, n))


def _shuffled_batches(x: torch.Tensor, batch_size: int, device, seed: int = 0):
    """(x batch, π(x) batch) pairs over the samples in order."""
    perm = sample_permutation(len(x), seed)
    for i in range(0, len(x), batch_size):
        yield x[i:i + batch_size].to(device), x[perm[i:i + batch_size]].to(device)


def _lam_cols(lam: float) -> dict:
    return {"lam_paper": float(lam), "lam_path": float(1.0 - lam)}


def _interpolated_models(model_a, model_b, lambdas, x_bn=None) -> list[nn.Module]:
    sd_a, sd_b = model_a.state_dict(), model_b.state_dict()
    out = []
    for lam in lambdas:
        m = copy.deepcopy(model_a)
        m.load_state_dict(paper_interpolation(sd_a, sd_b, float(lam)))
        if x_bn is not None:
            reset_bn_stats(m, x_bn.to(_model_device(m)))
        m.eval()
        out.append(m)
    return out


# --------------------------------------------------------------------------- 1. LEWC / LLFC
@torch.no_grad()
def lewc_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lambdas, batch_size: int = 500,
              x_bn: torch.Tensor | None = None) -> list[dict]:
    """Rows {layer, lam_paper, lam_path, lewc_cos, lewc_cos_shuffled, llfc_cos} (see module doc, §1)."""
    model_a.eval()
    model_b.eval()
    lambdas = [float(l) for l in lambdas]
    models = _interpolated_models(model_a, model_b, lambdas, x_bn)
    if x_bn is not None:  # endpoints get re-estimated statistics too, like every θ_λ
        model_a, model_b = _interpolated_models(model_a, model_b, [1.0, 0.0], x_bn)
    dev = _model_device(model_a)
    sums = None
    n = 0
    for xb, xp in _shuffled_batches(x, batch_size, dev):
        fa, fb = model_a.hidden_features(xb), model_b.hidden_features(xb)
        fa_p, fb_p = model_a.hidden_features(xp), model_b.hidden_features(xp)
        if sums is None:
            sums = torch.zeros(len(lambdas), len(fa), 3, dtype=torch.float64)
        for k, (lam, m) in enumerate(zip(lambdas, models)):
            for j, fl in enumerate(m.hidden_features(xb)):
                l = j + 1
                wa, wb = lam ** l, (1 - lam) ** l
                lewc = wa * fa[j] + wb * fb[j]
                null = wa * fa[j] + wb * fb_p[j] if lam <= 0.5 else wa * fa_p[j] + wb * fb[j]
                llfc = lam * fa[j] + (1 - lam) * fb[j]
                sums[k, j, 0] += per_sample_cosine(fl, lewc).sum().cpu()
                sums[k, j, 1] += per_sample_cosine(fl, null).sum().cpu()
                sums[k, j, 2] += per_sample_cosine(fl, llfc).sum().cpu()
        n += len(xb)
    rows = []
    for k, lam in enumerate(lambdas):
        for j in range(sums.shape[1]):
            rows.append({"layer": j + 1, **_lam_cols(lam), "lewc_cos": float(sums[k, j, 0] / n),
                         "lewc_cos_shuffled": float(sums[k, j, 1] / n), "llfc_cos": float(sums[k, j, 2] / n)})
    return rows


# --------------------------------------------------------------------------- 2. weak additivity
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


def _supports_pre(model: nn.Module) -> bool:
    return "pre" in inspect.signature(model.hidden_features).parameters


@torch.no_grad()
def weak_additivity_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lambdas,
                         batch_size: int = 500) -> list[dict]:
    """Rows {layer, lam_paper, lam_path, weak_additivity, weak_additivity_shuffled, weak_additivity_lewc, and
    the Gaussian references}."""
    if not (_supports_pre(model_a) and _supports_pre(model_b)):
        raise NotImplementedError(f"{type(model_a).__name__}.hidden_features has no pre=True path; "
                                  f"weak additivity needs pre-activations (available for the MLP)")
    model_a.eval()
    model_b.eval()
    act = getattr(model_a, "act", None) or nn.ReLU()
    lambdas = [float(l) for l in lambdas]
    dev = _model_device(model_a)
    sums, n = None, 0
    for xb, xp in _shuffled_batches(x, batch_size, dev):
        za, zb = model_a.hidden_features(xb, pre=True), model_b.hidden_features(xb, pre=True)
        zb_p = model_b.hidden_features(xp, pre=True)
        if sums is None:
            sums = torch.zeros(len(lambdas), len(za), 3, dtype=torch.float64)
        for j, (a, b, bp) in enumerate(zip(za, zb, zb_p)):
            l = j + 1
            a, b, bp = a.double(), b.double(), bp.double()
            ra, rb, rbp = act(a), act(b), act(bp)
            for k, lam in enumerate(lambdas):
                for c, (wa, wb) in enumerate(((lam, 1 - lam), (lam ** l, (1 - lam) ** l))):
                    sums[k, j, c] += per_sample_cosine(act(wa * a + wb * b), wa * ra + wb * rb).sum().cpu()
                sums[k, j, 2] += per_sample_cosine(act(lam * a + (1 - lam) * bp),
                                                   lam * ra + (1 - lam) * rbp).sum().cpu()
        n += len(xb)
    rows = []
    for k, lam in enumerate(lambdas):
        for j in range(sums.shape[1]):
            l = j + 1
            gl = (lam ** l, (1 - lam) ** l)
            rows.append({"layer": l, **_lam_cols(lam),
                         "weak_additivity": float(sums[k, j, 0] / n),
                         "weak_additivity_shuffled": float(sums[k, j, 2] / n),
                         "weak_additivity_lewc": float(sums[k, j, 1] / n),
                         "weak_additivity_gaussian": gaussian_weak_additivity(lam, 1 - lam),
                         "weak_additivity_lewc_gaussian": (gaussian_weak_additivity(*gl) if sum(gl) > 0
                                                           else float("nan"))})
    return rows


# --------------------------------------------------------------------------- 3. reciprocal orthogonality
def _weight_layers_and_inputs(model: nn.Module, x: torch.Tensor):
    """(modules producing each hidden layer, their inputs z_{l−1}) for MLP and VGG-11."""
    from lmcflow.models import MLP, VGG11

    feats = model.hidden_features(x)
    if isinstance(model, MLP):
        return list(model.layers), [x.flatten(1)] + feats[:-1]
    if isinstance(model, VGG11):
        inputs = [x] + [F.max_pool2d(f, 2, ceil_mode=True) if pool else f
                        for f, pool in zip(feats[:-1], model.pool_after[:-1])]
        return list(model.convs), inputs
    raise NotImplementedError(f"reciprocal orthogonality is implemented for MLP and VGG11, not "
                              f"{type(model).__name__} (residual blocks have no single W_l z_(l-1))")


def _linear_part(layer: nn.Module, z: torch.Tensor) -> torch.Tensor:
    return layer(z) - layer(torch.zeros_like(z[:1]))


@torch.no_grad()
def reciprocal_orthogonality_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor,
                                  batch_size: int = 500) -> list[dict]:
    """Rows {layer, cross_ratio_a, cross_ratio_b, cross_cos, cross_ratio_permuted_a, cross_ratio_permuted_b}
    (see module doc, §3)."""
    model_a.eval()
    model_b.eval()
    dev = _model_device(model_a)
    acc, n, perms = None, 0, {}
    for xb in _batches(x, batch_size, dev):
        la, za = _weight_layers_and_inputs(model_a, xb)
        lb, zb = _weight_layers_and_inputs(model_b, xb)
        if acc is None:
            acc = torch.zeros(len(la), 7, dtype=torch.float64)
            perms = {(role, j): unit_permutation(z[j].shape[1], role, j + 1).to(dev)
                     for role, z in (("a", za), ("b", zb)) for j in range(len(la))}
        for j in range(len(la)):
            aa, ab = _linear_part(la[j], za[j]).double(), _linear_part(la[j], zb[j]).double()
            bb, ba = _linear_part(lb[j], zb[j]).double(), _linear_part(lb[j], za[j]).double()
            ap = _linear_part(la[j], za[j][:, perms["a", j]]).double()
            bp = _linear_part(lb[j], zb[j][:, perms["b", j]]).double()
            acc[j, 0] += ab.pow(2).sum().cpu()
            acc[j, 1] += aa.pow(2).sum().cpu()
            acc[j, 2] += ba.pow(2).sum().cpu()
            acc[j, 3] += bb.pow(2).sum().cpu()
            acc[j, 4] += per_sample_cosine(ab + ba, aa + bb).sum().cpu()
            acc[j, 5] += ap.pow(2).sum().cpu()
            acc[j, 6] += bp.pow(2).sum().cpu()
        n += len(xb)

    def ratio(num, den):
        return float((num / den).sqrt()) if den > 0 else float("nan")

    rows = []
    for j in range(acc.shape[0]):
        s = acc[j]
        rows.append({"layer": j + 1, "cross_ratio_a": ratio(s[0], s[1]), "cross_ratio_b": ratio(s[2], s[3]),
                     "cross_cos": float(s[4] / n), "cross_ratio_permuted_a": ratio(s[5], s[1]),
                     "cross_ratio_permuted_b": ratio(s[6], s[3])})
    return rows


# --------------------------------------------------------------------------- 4. low rank
def rank_stats(weight: torch.Tensor, energy: float = DEFAULT_ENERGY) -> dict:
    """rank99 (k for ``energy`` of Σs²), its fraction of min(shape), entropy effective rank and its fraction."""
    w = weight.detach().double().reshape(weight.shape[0], -1)
    r = min(w.shape)
    s = torch.linalg.svdvals(w.cpu())
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
    from lmcflow.models import MLP, VGG11, ResNet20

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


def random_rank_reference(shape: tuple, energy: float = DEFAULT_ENERGY, max_dim: int = 1024) -> dict:
    """erank_rel and rank99_frac of a seeded standard Gaussian matrix of ``shape`` (out, in·k·k), scaled
    down to at most ``max_dim`` rows and columns with the same aspect ratio."""
    rows, cols = int(shape[0]), int(math.prod(shape[1:]))
    scale = min(1.0, max_dim / max(rows, cols))
    rows, cols = max(1, round(rows * scale)), max(1, round(cols * scale))
    g = generator("mechanism-random-matrix", rows, cols)
    st = rank_stats(torch.randn(rows, cols, generator=g, dtype=torch.float64), energy)
    return {"erank_rel_random": st["erank_rel"], "rank99_frac_random": st["rank99_frac"]}


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


# --------------------------------------------------------------------------- 5. neuron activity
@torch.no_grad()
def second_moments(model: nn.Module, x: torch.Tensor, batch_size: int = 500) -> list[torch.Tensor]:
    """Per unit m_i = mean over samples (and pixels) of f_{l,i}², one float64 CPU tensor per layer."""
    model.eval()
    dev = _model_device(model)
    sums, count = None, None
    for xb in _batches(x, batch_size, dev):
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


def neuron_activity_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor,
                         threshold: float = DEFAULT_ACTIVE_THRESHOLD, batch_size: int = 500) -> list[dict]:
    """Rows {layer, n_units, n_active_{a,b}, frac_active_{a,b}, active_jaccard, m2_mean_{a,b}, m2_max_{a,b}}."""
    ma, mb = second_moments(model_a, x, batch_size), second_moments(model_b, x, batch_size)
    rows = []
    for j, (a, b) in enumerate(zip(ma, mb)):
        act_a, act_b = active_units(a, threshold), active_units(b, threshold)
        union = int((act_a | act_b).sum())
        rows.append({"layer": j + 1, "n_units": len(a),
                     "n_active_a": int(act_a.sum()), "n_active_b": int(act_b.sum()),
                     "frac_active_a": float(act_a.float().mean()), "frac_active_b": float(act_b.float().mean()),
                     "active_jaccard": int((act_a & act_b).sum()) / union if union else float("nan"),
                     "m2_mean_a": float(a.mean()), "m2_mean_b": float(b.mean()),
                     "m2_max_a": float(a.max()), "m2_max_b": float(b.max()), "active_threshold": threshold})
    return rows


# --------------------------------------------------------------------------- all together
def layer_metrics(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lambdas, batch_size: int = 500,
                  x_bn: torch.Tensor | None = None, energy: float = DEFAULT_ENERGY,
                  active_threshold: float = DEFAULT_ACTIVE_THRESHOLD) -> list[dict]:
    """One row per (layer, λ) with every metric above; λ-independent metrics repeat on each λ.

    Metrics an architecture does not support (weak additivity without pre-activations,
    reciprocal orthogonality for ResNet-20) are NaN.
    """
    rows = lewc_rows(model_a, model_b, x, lambdas, batch_size, x_bn)
    try:
        extra_lam = weak_additivity_rows(model_a, model_b, x, lambdas, batch_size)
    except NotImplementedError:
        extra_lam = [{"layer": r["layer"], "lam_paper": r["lam_paper"], "weak_additivity": float("nan"),
                      "weak_additivity_shuffled": float("nan"), "weak_additivity_lewc": float("nan"),
                      "weak_additivity_gaussian": gaussian_weak_additivity(r["lam_paper"]),
                      "weak_additivity_lewc_gaussian": float("nan")} for r in rows]
    by_layer: dict[int, dict] = {}
    try:
        for r in reciprocal_orthogonality_rows(model_a, model_b, x, batch_size):
            by_layer.setdefault(r["layer"], {}).update(r)
    except NotImplementedError:
        pass
    for r in weight_rank_rows(model_a, model_b, energy):
        by_layer.setdefault(r["layer"], {}).update(r)
    for r in neuron_activity_rows(model_a, model_b, x, active_threshold, batch_size):
        by_layer.setdefault(r["layer"], {}).update(r)
    lam_extra = {(r["layer"], r["lam_paper"]): r for r in extra_lam}
    nan_cols = ("cross_ratio_a", "cross_ratio_b", "cross_cos", "cross_ratio_permuted_a", "cross_ratio_permuted_b")
    out = []
    for r in rows:
        row = dict(r)
        row.update({k: v for k, v in lam_extra[(r["layer"], r["lam_paper"])].items() if k not in row})
        row.update({k: v for k, v in by_layer.get(r["layer"], {}).items() if k not in row})
        for k in nan_cols:
            row.setdefault(k, float("nan"))
        out.append(row)
    return out


__all__ = [
    "DEFAULT_ACTIVE_THRESHOLD",
    "DEFAULT_ENERGY",
    "active_units",
    "gaussian_weak_additivity",
    "hidden_layer_weights",
    "layer_metrics",
    "lewc_rows",
    "neuron_activity_rows",
    "paper_interpolation",
    "per_sample_cosine",
    "random_rank_reference",
    "rank_stats",
    "reciprocal_orthogonality_rows",
    "sample_permutation",
    "second_moments",
    "unit_permutation",
    "weak_additivity_rows",
    "weight_rank_rows",
]
