"""REPAIR (Jordan et al., ICLR 2023): reset the per-channel statistics of an interpolated model's pre-activations
to the interpolation of its endpoints' statistics, and fold the correction into the weights.

Interpolated networks suffer variance collapse: the spread of each channel's pre-activation shrinks along the
path. For every permuted group of the model's ``PermutationSpec`` the tracked pre-activation is the one
activation matching reads, ``model.hidden_features(x, pre=True)[spec.feature_index[group]]``. With μ, σ its
per-channel mean and (population) standard deviation over the calibration inputs (channels of a convolution
pooled over positions, as BatchNorm pools them), REPAIR at λ sets

    goal μ = (1−λ)·μ_A + λ·μ_B,  goal σ = (1−λ)·σ_A + λ·σ_B   (the REPAIR paper's rule, std not variance)

by the affine correction z ↦ a·z + c, a = goal σ / σ_λ, c = goal μ − a·μ_λ, applied in forward order (each
layer's statistics are measured with the layers before it already corrected, as REPAIR's reset pass does).

Where the correction goes (the model keeps its original architecture):
- no normalisation (MLP, VGG-11 with ``model.norm: none``): into the layer producing the pre-activation
  (weight and fixed offset scaled by a per output channel, bias → a·bias + c);
- LayerNorm / GroupNorm(1) nets: the tracked pre-activation is the norm's output, so the correction goes into the
  norm's per-channel affine (γ → a·γ, β → a·β + c). Per-example normalisation does not undo a per-channel
  rescale after it, so this is REPAIR on the post-norm pre-activation (the paper's LayerNorm nets were likewise
  repaired after the norm);
- BatchNorm nets: REPAIR is the BatchNorm reset. Re-estimated running statistics make each channel's
  post-norm mean and std the interpolated β and |γ|, which are the interpolated endpoint statistics when the
  endpoints' γ agree in sign (tests/test_repair.py checks the correction left after the reset is the identity);
  ``repair_state`` resets and returns.
A tracked pre-activation that no single module outputs (a residual stream, norm2(conv2(h)) + shortcut, in a
ResNet without BatchNorm) cannot take a folded correction: ``repair_plan`` refuses such models.
"""
from __future__ import annotations

import copy
import logging

import torch
from torch import nn

from lmcflow.alignment.spec import PermutationSpec, permutation_spec
from lmcflow.evaluation import reset_bn_stats
from lmcflow.models import has_batchnorm
from lmcflow.state import like_state

log = logging.getLogger(__name__)


class RepairError(ValueError):
    """The model has a tracked pre-activation REPAIR cannot correct by folding."""


def repair_plan(model: nn.Module, spec: PermutationSpec | None = None, x_example: torch.Tensor | None = None
                ) -> list[tuple[str, int, str]]:
    """[(group, hidden_features index, producing module)] in forward order: the module whose output *is* the
    tracked pre-activation and that carries its per-channel affine parameters, found with forward hooks on
    ``x_example`` (one input).

    BatchNorm nets return [] (REPAIR is the BatchNorm reset there)."""
    if has_batchnorm(model):
        return []
    spec = spec or permutation_spec(model)
    if x_example is None:
        raise ValueError("repair_plan needs x_example: one input of the model")
    outputs: list[tuple[torch.Tensor, str]] = []  # kept alive: identity, not a reusable id(), names the layer
    handles = []
    for name, m in model.named_modules():
        if not list(m.children()):
            handles.append(m.register_forward_hook(
                lambda mod, _inp, out, name=name: outputs.append((out, name))))
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            feats = model.hidden_features(x_example[:1], pre=True)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    modules = dict(model.named_modules())
    plan = []
    for group, index in sorted(spec.feature_index.items(), key=lambda kv: kv[1]):
        names = [n for t, n in outputs if t is feats[index] and _affine(modules[n])]
        if not names:
            raise RepairError(
                f"REPAIR: the pre-activation of group {group!r} (hidden feature {index}) is not the output of one "
                f"layer with per-channel weights (e.g. a residual sum without BatchNorm), so no correction can be "
                f"folded into the weights; merge.repair supports MLP and VGG-11 (any norm) and BatchNorm nets")
        plan.append((group, index, names[-1]))
    return plan


def _affine(m: nn.Module) -> bool:
    w = getattr(m, "weight", None)
    return isinstance(w, torch.Tensor) and w.dim() >= 1


@torch.no_grad()
def channel_stats(model: nn.Module, index: int, x: torch.Tensor, batch_size: int = 1000
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, population std) per channel of ``hidden_features(x, pre=True)[index]`` over ``x`` (and over
    positions for conv features), accumulated in float64."""
    model.eval()
    total, sq, count = None, None, 0
    for i in range(0, len(x), batch_size):
        z = model.hidden_features(x[i:i + batch_size], pre=True)[index].double()
        z = z.movedim(1, -1).reshape(-1, z.shape[1])
        total = z.sum(0) if total is None else total + z.sum(0)
        sq = (z * z).sum(0) if sq is None else sq + (z * z).sum(0)
        count += z.shape[0]
    mean = total / count
    var = (sq / count - mean * mean).clamp_min(0.0)
    return mean, var.sqrt()


@torch.no_grad()
def endpoint_stats(model: nn.Module, x: torch.Tensor, plan: list) -> dict:
    """{group: (mean, std)} of an endpoint's tracked pre-activations on the calibration inputs ``x``."""
    return {group: channel_stats(model, index, x) for group, index, _ in plan}


def correction(mean: torch.Tensor, std: torch.Tensor, goal_mean: torch.Tensor, goal_std: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, c) of z ↦ a·z + c taking (mean, std) to (goal mean, goal std); a constant channel (std 0) keeps
    a = 1 and only moves its mean."""
    live = std > 0
    a = torch.where(live, goal_std / torch.where(live, std, torch.ones_like(std)), torch.ones_like(std))
    return a, goal_mean - a * mean


@torch.no_grad()
def fold(module: nn.Module, a: torch.Tensor, c: torch.Tensor, what: str) -> None:
    """Make ``module``'s output a·out + c per output channel (dim 0 of its weight) in place: weight (and a
    symmetry-breaking layer's fixed offset, W_eff = mask⊙W + offset) scaled by a, bias → a·bias + c."""
    shape = (-1,) + (1,) * (module.weight.dim() - 1)
    module.weight.mul_(a.to(module.weight.dtype).reshape(shape))
    offset = getattr(module, "offset", None)
    if isinstance(offset, torch.Tensor):
        offset.mul_(a.to(offset.dtype).reshape(shape))
    bias = getattr(module, "bias", None)
    if bias is None:
        if torch.any(c != 0):
            raise RepairError(f"REPAIR: {what} has no bias to take the mean correction; train it with "
                              f"model.bias: true")
        return
    bias.mul_(a.to(bias.dtype)).add_(c.to(bias.dtype))


def goal_stats(stats: list[dict], weights: list[float]) -> dict:
    """{group: (Σ wᵢ·meanᵢ, Σ wᵢ·stdᵢ)}: the statistics REPAIR resets a merge of several endpoints to (two
    endpoints at λ: weights (1−λ, λ); N-way averaging: 1/N each)."""
    return {g: (sum(w * s[g][0] for s, w in zip(stats, weights, strict=True)),
                sum(w * s[g][1] for s, w in zip(stats, weights, strict=True))) for g in stats[0]}


def interpolated_goal(stats_a: dict, stats_b: dict, lam: float) -> dict:
    """``goal_stats`` of a two-model path at λ (exactly A's at λ = 0 and B's at λ = 1)."""
    if lam == 0:
        return stats_a
    if lam == 1:
        return stats_b
    return {g: (torch.lerp(stats_a[g][0], stats_b[g][0], lam), torch.lerp(stats_a[g][1], stats_b[g][1], lam))
            for g in stats_a}


@torch.no_grad()
def repair_state(model: nn.Module, state: dict, goal: dict, x: torch.Tensor, plan: list,
                 batch_size: int = 1000, found: dict | None = None) -> dict:
    """``state`` (a merged model) with REPAIR applied: per tracked group, in forward order, the pre-activation's
    per-channel mean and std on ``x`` reset to ``goal`` ({group: (mean, std)}, ``interpolated_goal`` or
    ``goal_stats``) and the correction folded into the producing module (module doc). BatchNorm nets (``plan``
    empty): the BatchNorm reset on ``x``. ``model`` is scratch (its state is overwritten); ``found``, when
    given, receives {producing module: (a, c)} (for ``with_correction_layers``)."""
    model.load_state_dict(state)
    if has_batchnorm(model):
        reset_bn_stats(model, x, batch_size)
        return _cloned(model)
    modules = dict(model.named_modules())
    for group, index, name in plan:
        mean, std = channel_stats(model, index, x, batch_size)
        a, c = correction(mean, std, *goal[group])
        if found is not None:
            found[name] = (a.clone(), c.clone())
        fold(modules[name], a, c, f"{name} (group {group})")
    return _cloned(model)


class ChannelAffine(nn.Module):
    """An explicit REPAIR correction layer: ``inner``'s output times a plus c per channel (dim 1)."""

    def __init__(self, inner: nn.Module, a: torch.Tensor, c: torch.Tensor):
        super().__init__()
        self.inner = inner
        self.register_buffer("a", a.float())
        self.register_buffer("c", c.float())

    def forward(self, x):
        out = self.inner(x)
        shape = (1, -1) + (1,) * (out.dim() - 2)
        return out * self.a.reshape(shape) + self.c.reshape(shape)


def _cloned(model: nn.Module):
    sd = model.state_dict()
    return like_state(((k, v.clone()) for k, v in sd.items()), sd)


def with_correction_layers(model: nn.Module, state: dict, found: dict) -> nn.Module:
    """A copy of ``model`` holding ``state`` with each corrected module wrapped in a ``ChannelAffine``: the
    REPAIR'd function with the correction as separate layers rather than folded."""
    net = copy.deepcopy(model)
    net.load_state_dict(state)
    for name, (a, c) in found.items():
        parent_name, _, leaf = name.rpartition(".")
        parent = net.get_submodule(parent_name) if parent_name else net
        inner = getattr(parent, leaf) if not leaf.isdigit() else parent[int(leaf)]
        wrapped = ChannelAffine(inner, a, c)
        if leaf.isdigit():
            parent[int(leaf)] = wrapped
        else:
            setattr(parent, leaf, wrapped)
    return net


def path_repair(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, batch_size: int = 1000):
    """fn(λ, state of θλ) -> its REPAIR'd state, for ``merging.evaluate_path(repair=...)``: the endpoints'
    statistics on the calibration inputs ``x`` are measured once (B as aligned onto A)."""
    plan = repair_plan(model_a, x_example=x[:1])
    stats_a, stats_b = endpoint_stats(model_a, x, plan), endpoint_stats(model_b, x, plan)
    scratch = copy.deepcopy(model_a)

    def repaired(lam: float, state: dict) -> dict:
        return repair_state(scratch, state, interpolated_goal(stats_a, stats_b, lam), x, plan, batch_size)

    return repaired
