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

Units and samples. A hidden layer's units are its neurons (MLP) or its **channels** (conv nets). A
feature tensor of shape (N, C, H, W) is read as N·H·W samples of C-dimensional unit vectors (every
pixel of every input is a sample: ``unit_rows``), a tensor (N, D) as N samples of D units. Every
cosine below is computed per such sample ("row") and averaged over all rows; norms pooled "over
samples × units" run over every entry. For the MLP a row is an input, as before.

Residual networks (ResNet-20). The layers are the convolutions of the main path, in order: the stem,
then for each of the nine blocks its first convolution (feature: the block interior
ReLU(BN(conv1(s)))) and its second (feature: the residual stream after the block,
ReLU(BN(conv2(h)) + shortcut(s)); pre-activation: BN(conv2(h)) + shortcut(s)) — 19 layers, the
entries of ``ResNet20.hidden_features``. Each layer's input z_{l−1} is the previous entry (the stream
for conv1, the interior for conv2), and W_l is that convolution alone: an identity shortcut is linear
and adds no cross term (s_A + s_B passes unchanged), the three 1×1 projection shortcuts are not
measured. LEWC's exponent l is the main-path depth (stem 1, block b's interior 2b, its output 2b + 1);
a shortcut carries shallower paths (with exact weak additivity and orthogonality the residual branch is
weighted λ² relative to the shortcut), so for ResNet-20 LEWC with this exponent is an approximation and
the width claims read it for plain nets (MLP, VGG-11).

Notation: f_l(θ) ∈ R^{n_l} post-activation features of hidden layer l (per row), z̃_l(θ) the
pre-activations (the input of the activation function, i.e. after the norm layer), W_l the weight of
the layer producing hidden layer l, z_{l−1}(θ) its input (f_{l−1}; the input x for l = 1; for VGG
the max-pooled f_{l−1} where a pool follows; for ResNet-20 see above). cos(u, v) = <u, v> / (‖u‖‖v‖)
per row, with cos = 1 when both vectors are exactly 0 and cos = 0 when only one is. "mean_x" is the
mean over the rows of ``x``'s features.

Same-run nulls. π is a fixed seeded permutation of the inputs (``sample_permutation``): evaluating
one model at π(x) while the other stays at x breaks the pairing of samples between A and B and keeps
everything else (both models, both feature distributions) — the independent baseline of a cosine
between the two models' features. P_A, P_B are fixed seeded permutations of a layer's input units and
Q_A, Q_B of its output units (``unit_permutation``): P_A z_A is model A's own representation at random
unit positions. R is model A moved by a random perturbation of the size of θ_B − θ_A
(``perturbed_state``): per parameter tensor k, θ_R,k = θ_A,k + δ_k with δ_k = g_k ‖θ_B,k − θ_A,k‖ / ‖g_k‖,
g_k standard Gaussian (seeded); buffers (BatchNorm statistics, masks) are A's. Interpolating A with R
walks the same distance as the merge, in a direction that carries no second network.

1. LEWC and LLFC (``lewc_rows``; any model with ``hidden_features``)
       lewc_cos           = mean_x cos( f_l(θ_λ)(x), λ^l f_l(θ_a)(x) + (1 − λ)^l f_l(θ_b)(x) )
       lewc_cos_shuffled  = the same with the features of the model with the larger LEWC weight at π(x):
                            f_l(θ_b)(π x) for λ ≤ ½, f_l(θ_a)(π x) for λ > ½ (shuffling the minor term
                            would leave the target almost unchanged, and the null uninformative)
       llfc_cos           = mean_x cos( f_l(θ_λ), λ f_l(θ_a) + (1 − λ) f_l(θ_b) )
       lewc_cos_perturbed = lewc_cos of the pair (A, R): LEWC along a path of the same length into a random
                            direction (``layer_metrics``). A flat loss landscape around A would make the merged
                            model work without LEWC; a high lewc_cos together with a low lewc_cos_perturbed says
                            the merge works because of B, not because any nearby point would.

2. Weak additivity of the activation σ (ReLU in the paper; the model's own
   ``act`` is used) on the endpoint models' pre-activations
   (``weak_additivity_rows``; needs ``hidden_features(x, pre=True)``: MLP, VGG-11, ResNet-20):
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

3. Reciprocal orthogonality (``reciprocal_orthogonality_rows``; MLP, VGG-11, ResNet-20), with W z the
   linear part of the layer (``layer(z) − layer(0)``, no bias), norms pooled over the rows (‖·‖_F over
   samples × units, so all-zero rows do not produce 0/0):
       cross_ratio_a = ‖W_a z_b‖_F / ‖W_a z_a‖_F,    cross_ratio_b = ‖W_b z_a‖_F / ‖W_b z_b‖_F
       cross_cos     = mean_x cos( W_a z_b + W_b z_a, W_a z_a + W_b z_b )                    (→ 0 with width)
       cross_transform_cos = mean_x cos( (W_a + W_b)(z_a + z_b), W_a z_a + W_b z_b )         (→ 1 with width)
       cross_ratio_permuted_a = ‖W_a P_A z_a‖_F / ‖W_a z_a‖_F,   cross_ratio_permuted_b = ‖W_b P_B z_b‖_F / ‖W_b z_b‖_F
       cross_transform_cos_permuted_a = the cross-transformation cosine of A with its relabelled copy A'
                     (z_A' = P_A z_a, W_A' = Q_A W_a P_Aᵀ, so W_A' z_A' = Q_A W_a z_a):
                     mean_x cos( W_a z_a + Q_A W_a z_a + W_a P_A z_a + Q_A W_a P_Aᵀ z_a, W_a z_a + Q_A W_a z_a );
                     cross_transform_cos_permuted_b likewise for B
   The cross-transformation cosine is the quantity of the paper's orthogonality figure that goes to 1:
   the merged layer (W_a + W_b) acting on the merged input (z_a + z_b) equals the sum of the models' own
   transformations when the cross terms vanish; at λ = ½ it is the LEWC form of layer l before the
   activation (θ_½'s weight is ½(W_a + W_b), LEWC's input ½^(l−1)(z_a + z_b); the cosine ignores the scale).
   At l = 1 both models read the same input, so the ratios are 1 and cross_cos is 1 by definition (layer 1
   has no cross term in LEWC). The permuted quantities are each model against a randomly relabelled copy of
   itself: the orthogonality that the model's low rank alone produces for inputs with its own statistics.

4. Low rank (``weight_rank_rows``): for each model's W_l reshaped to
   (out, in·k·k) with singular values s_1 ≥ … ≥ s_r, r = min(shape):
       rank99      = min{k : Σ_{i≤k} s_i² ≥ 0.99 Σ_i s_i²},   rank99_frac = rank99 / r
       erank       = exp(−Σ_i p_i log p_i),  p_i = s_i / Σ_j s_j   (Roy & Vetterli 2007; 0 log 0 = 0)
       erank_rel   = erank / r
   (``energy`` changes 0.99.) The stored ``.weight`` is used, not an effective
   masked weight of a symmetry-breaking layer. Singular values are computed in float64 on the weight's
   device (``singular_values``: from the eigenvalues of the smaller Gram matrix) and memoised by the weight's
   bytes (a model enters n − 1 pairs). Reference
   (``random_rank_reference``):
       erank_rel_random, rank99_frac_random = the same for a seeded standard Gaussian
       matrix of W_l's shape (scaled down to at most 1024 rows and columns with the same
       aspect ratio, where the relative ranks are within ~1% of their Marchenko–Pastur
       limits): the rank of an unstructured weight, e.g. an untrained network's.

5. Neuron activity (``neuron_activity_rows``): per unit i of layer l the
   uncentred second moment m_i = mean_x f_{l,i}(x)² (conv: also over pixels), in
   each model. Unit i is *active* when m_i > τ · max_j m_j (τ = ``threshold``,
   default 1e-3: RMS activity above ~3.2 % of the layer's most active unit).
       active_jaccard = |act_a ∩ act_b| / |act_a ∪ act_b|   (NaN if both empty)
       active_jaccard_independent = E|act_a ∩ act_b| / E|act_a ∪ act_b| for active sets of the same sizes placed
                     independently at random: with n units, e = n_a n_b / n, it is e / (n_a + n_b − e)
   computed on unit indices, so B must already be aligned to A. The second is the overlap that chance
   alone gives two sets of these sizes: active sets that avoid each other ("non-overlap") lie below it,
   sets that share units (aligned neurons) above it. Rows also carry n_active_{a,b}, frac_active_{a,b}
   and the mean/max of m in each model.
"""
from __future__ import annotations

import copy
import functools
import hashlib
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


def unit_rows(t: torch.Tensor) -> torch.Tensor:
    """A feature tensor as (samples, units): (N, D) unchanged; (N, C, H, W) as N·H·W rows of C channels."""
    if t.dim() <= 2:
        return t.reshape(len(t), -1)
    return t.movedim(1, -1).reshape(-1, t.shape[1])


def row_cosine(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``per_sample_cosine`` of the unit vectors of every row (``unit_rows``): one cosine per input, or per
    pixel of every input for conv features."""
    return per_sample_cosine(unit_rows(u), unit_rows(v))


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
    """P_A / P_B (``role`` "a" / "b"): a fixed seeded permutation of the n input units of hidden layer ``layer``;
    Q_A / Q_B (``role`` "a-out" / "b-out"): of its n output units."""
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


# --------------------------------------------------------------------------- 1. LEWC / LLFC
@torch.no_grad()
def lewc_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lambdas, batch_size: int = 500,
              x_bn: torch.Tensor | None = None, shuffled: bool = True) -> list[dict]:
    """Rows {layer, lam_paper, lam_path, lewc_cos, lewc_cos_shuffled, llfc_cos} (see module doc, §1);
    ``shuffled=False`` skips the null (NaN) and its forward passes."""
    model_a.eval()
    model_b.eval()
    lambdas = [float(v) for v in lambdas]
    models = _interpolated_models(model_a, model_b, lambdas, x_bn)
    if x_bn is not None:  # endpoints get re-estimated statistics too, like every θ_λ
        model_a, model_b = _interpolated_models(model_a, model_b, [1.0, 0.0], x_bn)
    dev = _model_device(model_a)
    sums, rows_seen = None, None
    for xb, xp in _shuffled_batches(x, batch_size, dev):
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
            rows.append({"layer": j + 1, **_lam_cols(lam), "lewc_cos": float(sums[k, j, 0] / n),
                         "lewc_cos_shuffled": float(sums[k, j, 1] / n) if shuffled else float("nan"),
                         "llfc_cos": float(sums[k, j, 2] / n)})
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
                                  f"weak additivity needs pre-activations (MLP, VGG-11, ResNet-20 have them)")
    model_a.eval()
    model_b.eval()
    act = getattr(model_a, "act", None) or nn.ReLU()
    lambdas = [float(v) for v in lambdas]
    dev = _model_device(model_a)
    sums, rows_seen = None, None
    for xb, xp in _shuffled_batches(x, batch_size, dev):
        za, zb = model_a.hidden_features(xb, pre=True), model_b.hidden_features(xb, pre=True)
        zb_p = model_b.hidden_features(xp, pre=True)
        if sums is None:
            sums = torch.zeros(len(lambdas), len(za), 3, dtype=torch.float64)
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
    rows = []
    for k, lam in enumerate(lambdas):
        for j in range(sums.shape[1]):
            depth, n = j + 1, rows_seen[j]
            gl = (lam ** depth, (1 - lam) ** depth)
            rows.append({"layer": depth, **_lam_cols(lam),
                         "weak_additivity": float(sums[k, j, 0] / n),
                         "weak_additivity_shuffled": float(sums[k, j, 2] / n),
                         "weak_additivity_lewc": float(sums[k, j, 1] / n),
                         "weak_additivity_gaussian": gaussian_weak_additivity(lam, 1 - lam),
                         "weak_additivity_lewc_gaussian": (gaussian_weak_additivity(*gl) if sum(gl) > 0
                                                           else float("nan"))})
    return rows


# --------------------------------------------------------------------------- 3. reciprocal orthogonality
def _weight_layers_and_inputs(model: nn.Module, x: torch.Tensor):
    """(modules producing each hidden layer, their inputs z_{l−1}) for MLP, VGG-11 and ResNet-20."""
    from lmcflow.models import MLP, VGG11, ResNet20

    feats = model.hidden_features(x)
    if isinstance(model, MLP):
        return list(model.layers), [x.flatten(1)] + feats[:-1]
    if isinstance(model, VGG11):
        inputs = [x] + [F.max_pool2d(f, 2, ceil_mode=True) if pool else f
                        for f, pool in zip(feats[:-1], model.pool_after[:-1])]
        return list(model.convs), inputs
    if isinstance(model, ResNet20):  # main-path convolutions; each reads the previous hidden feature (module doc)
        convs = [model.stem] + [c for blocks in model.stages for block in blocks for c in (block.conv1, block.conv2)]
        return convs, [x] + feats[:-1]
    raise NotImplementedError(f"reciprocal orthogonality is implemented for MLP, VGG11 and ResNet20, not "
                              f"{type(model).__name__}")


def _linear_part(layer: nn.Module, z: torch.Tensor) -> torch.Tensor:
    return layer(z) - layer(torch.zeros_like(z[:1]))


ORTHOGONALITY_COLUMNS = ("cross_ratio_a", "cross_ratio_b", "cross_cos", "cross_transform_cos",
                         "cross_ratio_permuted_a", "cross_ratio_permuted_b", "cross_transform_cos_permuted_a",
                         "cross_transform_cos_permuted_b")


@torch.no_grad()
def reciprocal_orthogonality_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor,
                                  batch_size: int = 500) -> list[dict]:
    """Rows {layer, cross_ratio_a, cross_ratio_b, cross_cos, cross_transform_cos, cross_ratio_permuted_a,
    cross_ratio_permuted_b, cross_transform_cos_permuted_a, cross_transform_cos_permuted_b} (module doc, §3)."""
    model_a.eval()
    model_b.eval()
    dev = _model_device(model_a)
    acc, rows_seen, perms = None, None, {}
    for xb in _batches(x, batch_size, dev):
        la, za = _weight_layers_and_inputs(model_a, xb)
        lb, zb = _weight_layers_and_inputs(model_b, xb)
        if acc is None:
            acc = torch.zeros(len(la), 10, dtype=torch.float64)
            rows_seen = torch.zeros(len(la), dtype=torch.float64)
            for role, layers, z in (("a", la, za), ("b", lb, zb)):
                for j in range(len(layers)):
                    p = unit_permutation(z[j].shape[1], role, j + 1).to(dev)
                    n_out = _linear_part(layers[j], z[j][:1]).shape[1]
                    perms[role, j] = (p, torch.argsort(p), unit_permutation(n_out, f"{role}-out", j + 1).to(dev))
        for j in range(len(la)):
            aa, ab = _linear_part(la[j], za[j]).double(), _linear_part(la[j], zb[j]).double()
            bb, ba = _linear_part(lb[j], zb[j]).double(), _linear_part(lb[j], za[j]).double()
            rows_seen[j] += len(unit_rows(aa))
            acc[j, 0] += ab.pow(2).sum().cpu()
            acc[j, 1] += aa.pow(2).sum().cpu()
            acc[j, 2] += ba.pow(2).sum().cpu()
            acc[j, 3] += bb.pow(2).sum().cpu()
            acc[j, 4] += row_cosine(ab + ba, aa + bb).sum().cpu()
            acc[j, 5] += row_cosine(aa + bb + ab + ba, aa + bb).sum().cpu()
            for c, (role, layer, z, own) in enumerate((("a", la[j], za[j], aa), ("b", lb[j], zb[j], bb))):
                p, p_inv, q = perms[role, j]
                moved = _linear_part(layer, z[:, p]).double()  # W P z: the copy's input read by the model
                back = _linear_part(layer, z[:, p_inv]).double()[:, q]  # Q W Pᵀ z: the model's input read by the copy
                direct = own + own[:, q]
                acc[j, 6 + c] += moved.pow(2).sum().cpu()
                acc[j, 8 + c] += row_cosine(direct + moved + back, direct).sum().cpu()

    def ratio(num, den):
        return float((num / den).sqrt()) if den > 0 else float("nan")

    rows = []
    for j in range(acc.shape[0]):
        s, n = acc[j], rows_seen[j]
        rows.append({"layer": j + 1, "cross_ratio_a": ratio(s[0], s[1]), "cross_ratio_b": ratio(s[2], s[3]),
                     "cross_cos": float(s[4] / n), "cross_transform_cos": float(s[5] / n),
                     "cross_ratio_permuted_a": ratio(s[6], s[1]), "cross_ratio_permuted_b": ratio(s[7], s[3]),
                     "cross_transform_cos_permuted_a": float(s[8] / n),
                     "cross_transform_cos_permuted_b": float(s[9] / n)})
    return rows


# --------------------------------------------------------------------------- 4. low rank
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


def independent_jaccard(n_a: int, n_b: int, n: int) -> float:
    """E|A ∩ B| / E|A ∪ B| for sets of n_a and n_b of n units placed independently at random (NaN if both empty)."""
    inter = n_a * n_b / n if n else 0.0
    union = n_a + n_b - inter
    return inter / union if union > 0 else float("nan")


def neuron_activity_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor,
                         threshold: float = DEFAULT_ACTIVE_THRESHOLD, batch_size: int = 500) -> list[dict]:
    """Rows {layer, n_units, n_active_{a,b}, frac_active_{a,b}, active_jaccard, active_jaccard_independent,
    m2_mean_{a,b}, m2_max_{a,b}} (module doc, §5)."""
    ma, mb = second_moments(model_a, x, batch_size), second_moments(model_b, x, batch_size)
    rows = []
    for j, (a, b) in enumerate(zip(ma, mb)):
        act_a, act_b = active_units(a, threshold), active_units(b, threshold)
        union = int((act_a | act_b).sum())
        rows.append({"layer": j + 1, "n_units": len(a),
                     "n_active_a": int(act_a.sum()), "n_active_b": int(act_b.sum()),
                     "frac_active_a": float(act_a.float().mean()), "frac_active_b": float(act_b.float().mean()),
                     "active_jaccard": int((act_a & act_b).sum()) / union if union else float("nan"),
                     "active_jaccard_independent": independent_jaccard(int(act_a.sum()), int(act_b.sum()), len(a)),
                     "m2_mean_a": float(a.mean()), "m2_mean_b": float(b.mean()),
                     "m2_max_a": float(a.max()), "m2_max_b": float(b.max()), "active_threshold": threshold})
    return rows


# --------------------------------------------------------------------------- all together
def layer_metrics(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lambdas, batch_size: int = 500,
                  x_bn: torch.Tensor | None = None, energy: float = DEFAULT_ENERGY,
                  active_threshold: float = DEFAULT_ACTIVE_THRESHOLD, perturbation_seed=0) -> list[dict]:
    """One row per (layer, λ) with every metric above; λ-independent metrics repeat on each λ.

    ``lewc_cos_perturbed`` is ``lewc_cos`` of A and ``perturbed_copy(A, B, perturbation_seed)``. Metrics an
    architecture does not support (weak additivity without pre-activations, reciprocal orthogonality outside
    MLP / VGG-11 / ResNet-20) are NaN.
    """
    rows = lewc_rows(model_a, model_b, x, lambdas, batch_size, x_bn)
    perturbed = lewc_rows(model_a, perturbed_copy(model_a, model_b, perturbation_seed), x, lambdas, batch_size, x_bn,
                          shuffled=False)
    perturbed = {(r["layer"], r["lam_paper"]): r["lewc_cos"] for r in perturbed}
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
    out = []
    for r in rows:
        row = dict(r)
        row["lewc_cos_perturbed"] = perturbed[(r["layer"], r["lam_paper"])]
        row.update({k: v for k, v in lam_extra[(r["layer"], r["lam_paper"])].items() if k not in row})
        row.update({k: v for k, v in by_layer.get(r["layer"], {}).items() if k not in row})
        for k in ORTHOGONALITY_COLUMNS:
            row.setdefault(k, float("nan"))
        out.append(row)
    return out


__all__ = [
    "DEFAULT_ACTIVE_THRESHOLD",
    "DEFAULT_ENERGY",
    "active_units",
    "gaussian_weak_additivity",
    "hidden_layer_weights",
    "independent_jaccard",
    "layer_metrics",
    "lewc_rows",
    "neuron_activity_rows",
    "paper_interpolation",
    "per_sample_cosine",
    "perturbed_copy",
    "perturbed_state",
    "random_rank_reference",
    "rank_stats",
    "reciprocal_orthogonality_rows",
    "row_cosine",
    "sample_permutation",
    "second_moments",
    "unit_permutation",
    "unit_rows",
    "weak_additivity_rows",
    "weight_rank_rows",
]
