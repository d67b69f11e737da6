"""Merging N ≥ 2 models of one point into one: alignment of every model onto a common frame, the plain average,
REPAIR of the average, and the models' logit ensemble beside it.

Alignment methods (``MANY_METHODS``):
- ``identity``: the plain average of the N models;
- ``weight_matching``: MergeMany (Git Re-Basin, Ainsworth et al. 2023, appendix): each model in turn is aligned
  by weight matching to the average of the others (as currently aligned; a move kept only where it raises
  the match with that average), until a full round moves no model (a fixed point) or ``max_rounds``; it starts
  from model i matched to the average of models 0..i−1. Model 0 is the reference frame and is never permuted
  (permuting every model
  by one permutation changes no function, so fixing one loses nothing); with N = 2 the result is pairwise weight
  matching of model 1 onto model 0, with the same seed;
- ``activation_matching``: every model matched to model 0 by the correlation of its activations (a star: one
  ``activation_matching`` per model).
"""
from __future__ import annotations

import math
import time

import torch
from torch import nn

from lmcflow.alignment.methods import activation_matching, weight_matching, weight_matching_objective
from lmcflow.alignment.spec import PermutationSpec, apply_permutation
from lmcflow.evaluation import metrics_from_outputs, predict, reset_bn_stats
from lmcflow.metrics import cross_entropy_at, fit_inverse_temperature
from lmcflow.state import like_state

MANY_METHODS = ("identity", "weight_matching", "activation_matching")


def average_states(states: list[dict]) -> dict:
    """θ = (1/N) Σ θᵢ for float tensors (summed in float64); integer buffers (BatchNorm counters) from model 0."""
    if len(states) < 1:
        raise ValueError("average_states needs at least one state")
    keys = states[0].keys()
    if any(s.keys() != keys for s in states):
        raise ValueError("the models have different parameter names; they cannot be averaged")
    out = {}
    for k, t in states[0].items():
        if t.is_floating_point():
            out[k] = (sum(s[k].double() for s in states) / len(states)).to(t.dtype)
        else:
            out[k] = t.clone()
    return like_state(out, states[0])


def identity_perms(spec: PermutationSpec) -> dict:
    return {g: torch.arange(n) for g, n in spec.sizes.items()}


@torch.no_grad()
def merge_many_weight_matching(spec: PermutationSpec, states: list[dict], max_rounds: int = 20, max_iter: int = 100,
                               seed: int = 0, init: str = "identity") -> tuple[list[dict], dict]:
    """MergeMany (module doc): [perms of model i] (model 0: identity) and {rounds, converged, seconds}. Every
    ``weight_matching`` call uses ``seed``, ``max_iter`` and ``init``; models are visited in order 1, …, N−1."""
    if len(states) < 2:
        raise ValueError(f"MergeMany needs N >= 2 models, got {len(states)}")
    t0 = time.perf_counter()
    perms = [identity_perms(spec) for _ in states]
    aligned = list(states)
    # start: model i matched to the average of models 0..i−1 as aligned so far (averaging not-yet-aligned models
    # into the target blurs it; from there MergeMany can settle in a fixed point that is not the best one)
    for i in range(1, len(states)):
        perms[i], _ = weight_matching(spec, average_states(aligned[:i]), states[i], max_iter=max_iter, seed=seed,
                                      init=init)
        aligned[i] = apply_permutation(spec, states[i], perms[i])
    rounds, converged = 0, False
    for _ in range(max_rounds):
        rounds += 1
        moved = False
        for i in range(1, len(states)):
            others = average_states([aligned[j] for j in range(len(states)) if j != i])
            new, _ = weight_matching(spec, others, states[i], max_iter=max_iter, seed=seed, init=init)
            # a move only where it raises <average of the others, θᵢ>: each raises Σ_{i<j} <θᵢ, θⱼ>, so the
            # rounds end (weight matching's own local optima would otherwise let them cycle)
            old_score = weight_matching_objective(spec, others, states[i], perms[i])
            new_score = weight_matching_objective(spec, others, states[i], new)
            if new_score > old_score + 1e-12 * max(1.0, abs(old_score)):
                perms[i], moved = new, True
                aligned[i] = apply_permutation(spec, states[i], new)
        if not moved:
            converged = True
            break
    return perms, {"rounds": rounds, "converged": converged, "seconds": time.perf_counter() - t0}


def align_many(method: str, spec: PermutationSpec, models: list[nn.Module], x: torch.Tensor | None = None,
               seed: int = 0, max_iter: int = 100, batch_size: int = 500, init: str = "identity"
               ) -> tuple[list[dict], dict]:
    """[perms of model i onto the common frame] with ``method`` (``MANY_METHODS``) and the method's info."""
    if method not in MANY_METHODS:
        raise ValueError(f"N-way merge method {method!r} is unknown; allowed: {', '.join(MANY_METHODS)}")
    if method == "identity":
        return [identity_perms(spec) for _ in models], {"rounds": 0, "converged": True, "seconds": 0.0}
    if method == "weight_matching":
        return merge_many_weight_matching(spec, [m.state_dict() for m in models], max_iter=max_iter, seed=seed,
                                          init=init)
    if x is None:
        raise ValueError("N-way activation matching needs training inputs x")
    t0 = time.perf_counter()
    perms = [identity_perms(spec)] + [activation_matching(models[0], m, spec, x, batch_size)[0] for m in models[1:]]
    return perms, {"rounds": 1, "converged": True, "seconds": time.perf_counter() - t0}


def _scores(out: torch.Tensor, y: torch.Tensor, beta: float) -> dict:
    m = metrics_from_outputs(out, y, "classification")
    return {"loss": m["loss"], "error": 1.0 - m["acc"],
            "calibrated_loss": cross_entropy_at(out, y, beta) if math.isfinite(beta) else math.nan}


@torch.no_grad()
def many_outputs(model: nn.Module, state: dict, splits: dict, x_bn: torch.Tensor | None) -> dict:
    """{split: fp32 outputs} of ``model`` holding ``state`` (BatchNorm statistics re-estimated on ``x_bn``)."""
    model.load_state_dict(state)
    if x_bn is not None:
        reset_bn_stats(model, x_bn)
    return {s: predict(model, xs) for s, xs in splits.items()}


def merge_scores(merged: dict, endpoints: list[dict], y: dict) -> list[dict]:
    """Rows {calibrated, <who>_<split>_<loss|error>} of the merged model's outputs ``merged``, the mean over the
    endpoints' own scores and their logit ensemble (the mean of the N models' logits). ``y``: {split: labels},
    with ``val``: one inverse temperature per model (merged, each endpoint, ensemble) fitted there."""
    ensemble = {s: torch.stack([e[s] for e in endpoints]).mean(0) for s in merged}
    who = {"merged": [merged], "endpoint": endpoints, "ensemble": [ensemble]}
    betas = {name: [fit_inverse_temperature(o["val"], y["val"]) if "val" in o else math.nan for o in outs]
             for name, outs in who.items()}
    rows = []
    for calibrated in (False, True):
        row = {"calibrated": calibrated}
        for name, outs in who.items():
            for split in ("train", "test"):
                scores = [_scores(o[split], y[split], b) for o, b in zip(outs, betas[name], strict=True)]
                loss = "calibrated_loss" if calibrated else "loss"
                row[f"{name}_{split}_loss"] = sum(s[loss] for s in scores) / len(scores)
                row[f"{name}_{split}_error"] = sum(s["error"] for s in scores) / len(scores)
        row["beta"] = betas["merged"][0] if calibrated else math.nan
        rows.append(row)
    return rows
