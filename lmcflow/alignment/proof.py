"""The proof of a permutation spec (``prove_spec``): a random permutation of every group leaves a model's outputs
unchanged, on a copy an untrained model's initial values cannot fool.

A freshly built model hides wrongly permuted tensors in three ways, each undone before the outputs are compared:
constant tensors (zero biases and class tokens, unit norm scales) look the same in any order, so every constant
or near-constant tensor is redrawn (``_unconstant``); a 1e-6 layer scale (ConvNeXt) shrinks a whole block below
any tolerance, so tiny tensors are redrawn at 0.1; initial BatchNorm statistics (mean 0, variance 1) leave the
output nearly independent of the input, so the running statistics are refilled by one train-mode pass over the
proof's batch. The residual is measured against the input-dependent part of the outputs (their spread over the
batch) in float64, where a correct spec leaves ~1e-14, and against the outputs' size in float32 (whose rounding
scales with it); a model whose outputs do not depend on its input cannot be proven.

Memory: the proof holds one float64 copy of the model (8 bytes a parameter) and nothing else of its size. Each
permutation is applied to the copy in place and undone by its inverse (re-indexing is exact), so no permuted
state_dict is built; the copy's values are rounded to float32 once, so the float32 check converts the copy to
float32 and back without losing a bit; only outputs are compared.

Details: docs/internals.md, "`lmcflow.alignment.derive`".
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from lmcflow.alignment.graph_axes import UnsupportedGraph
from lmcflow.alignment.heads import check_structure, complete, draw, ties
from lmcflow.alignment.table import PermutationSpec, inverse, permute_in_place
from lmcflow.seeding import generator

PROOF_RTOL = 1e-3  # float32: max |Δ output| ≤ PROOF_RTOL × max |output|, or 10× float32 rounding (``_check``;
# norms refilled on a small batch amplify it); float64 decides
PROOF_RTOL_FP64 = 1e-8  # float64: max |Δ output| ≤ PROOF_RTOL_FP64 × the outputs' spread (correct: 1e-14 to 3e-11 when
# norms refilled on 2 inputs amplify rounding; a wrong spec: 1e-3 and more)
TINY = 1e-4  # a tensor whose entries are all below this (a layer scale at 1e-6) is redrawn
FLAT = 1e-3  # a tensor whose spread is below this fraction of its magnitude is near-constant


class SpecProofError(ValueError):
    pass


def _outputs(model: nn.Module, x: torch.Tensor) -> list:
    return [t for t in tree_leaves(model(x)) if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _unconstant(t: torch.Tensor, gen: torch.Generator) -> None:
    """A constant, near-constant or tiny tensor made a varied one of unit scale, in place (module doc): all entries
    below ``TINY`` (zeros, a 1e-6 layer scale) -> N(0, 0.1²); a nonzero near-constant (unit norm scales) -> each
    entry times a factor in [0.5, 1.5] (signs, and the positivity of variances, are kept). Others are kept."""
    if not t.is_floating_point() or t.numel() < 2:
        return
    mag = float(t.abs().max())
    if mag < TINY:
        t.copy_(0.1 * torch.randn(t.shape, generator=gen, dtype=t.dtype))
    elif float(t.max() - t.min()) <= FLAT * mag:
        t.mul_(0.5 + torch.rand(t.shape, generator=gen, dtype=t.dtype))


def _refill_norm_statistics(m: nn.Module, x: torch.Tensor) -> None:
    """Running statistics of every BatchNorm/InstanceNorm with running stats = those of one train-mode pass."""
    norms = [mod for mod in m.modules()
             if isinstance(mod, nn.modules.batchnorm._NormBase) and mod.track_running_stats]
    if not norms:
        return
    kept = [mod.momentum for mod in norms]
    for mod in norms:
        mod.reset_running_stats()
        mod.momentum = None  # cumulative average: one pass sets the batch's statistics exactly
        mod.train()
    m(x)
    for mod, momentum in zip(norms, kept, strict=True):
        mod.momentum = momentum
        mod.eval()


def proof_state(model: nn.Module, x: torch.Tensor, seed: int = 0) -> nn.Module:
    """A float64 eval-mode copy of ``model`` with its constants redrawn, its norm statistics refilled on ``x`` and
    every value rounded to float32 (what ``prove_spec`` permutes in place; module doc)."""
    try:
        m = copy.deepcopy(model).double().eval()
    except RuntimeError as err:  # torch.nn.utils.weight_norm's computed attribute cannot be copied
        if "deepcopy protocol" not in str(err):  # anything else (memory) is not the model's fault
            raise
        raise UnsupportedGraph(f"cannot copy {type(model).__name__} for the proof ({str(err).splitlines()[0]}); "
                               f"a hook-based weight_norm or spectral_norm: use torch.nn.utils.parametrizations' "
                               f"forms, or remove it") from err
    gen = generator("spec-proof", seed)
    with torch.no_grad():
        for t in m.state_dict().values():  # the copy's own tensors, each name in order (as the load did before)
            _unconstant(t, gen)
        _refill_norm_statistics(m, x.double())
        for t in m.state_dict().values():  # float32 values: the float32 check's cast and its way back are exact
            if t.is_floating_point():
                t.copy_(t.float())
    return m


def _spread(outs: list, n: int) -> float:
    """The input-dependent scale of the outputs: max |y - mean over the batch of y| (else max |y|)."""
    s = 0.0
    for y in outs:
        if y.dim() and y.shape[0] == n:
            s = max(s, float((y - y.mean(0, keepdim=True)).abs().max()))
        else:
            s = max(s, float(y.abs().max()))
    return s


def _delta(outs: list, ref: list) -> float:
    return max((float((a.double() - b.double()).abs().max()) for a, b in zip(outs, ref, strict=True)),
               default=0.0)


def _check_structure(spec: PermutationSpec) -> None:
    for key, ax in spec.axes.items():
        named = [g for g in ax if g is not None]
        if key in spec.parameters and len(named) != len(set(named)):
            raise SpecProofError(f"the permutation spec of {spec.arch} ties two axes of {key} {ax} to one group; "
                                 f"weight matching needs distinct groups on a tensor's axes")
        unknown = [g for g in named if g not in spec.sizes]
        if unknown:
            raise SpecProofError(f"the permutation spec of {spec.arch}: {key} names groups {unknown} it does not "
                                 f"size")
    bad = check_structure(spec)
    if bad:
        raise SpecProofError(f"the permutation spec of {spec.arch} has inconsistent attention heads: " +
                             "; ".join(bad))


@torch.no_grad()
def prove_spec(model: nn.Module, spec: PermutationSpec, x: torch.Tensor, seed: int = 0,
               rtol: float = PROOF_RTOL, rtol_fp64: float = PROOF_RTOL_FP64, state: tuple | None = None,
               name_groups: bool = True) -> float:
    """Check that a random permutation of every group of ``spec`` leaves ``model``'s outputs on ``x`` unchanged, in
    float64 (max |Δ| ≤ ``rtol_fp64`` × spread) and float32 (≤ ``rtol`` × max |output|), on the copy of ``proof_state``
    (module doc). Returns the float64 residual max |Δ| / spread; SpecProofError names the failing groups (one
    more check per group; ``name_groups=False`` skips it). ``state``: ``proof_state(model, x, seed)`` when several
    specs of one model are checked (each check leaves it as it found it, a failed one too)."""
    _check_structure(spec)
    if not spec.sizes:
        raise SpecProofError(f"the permutation spec of {spec.arch} has no group: nothing would be aligned")
    m = state if state is not None else proof_state(model, x, seed)
    gen = generator("spec-proof-perms", seed)
    perms = draw(spec, gen, phase=0)  # heads: each attention's heads moved, and a random τ within each head
    residual, exact = _check(m, spec, x, torch.float64, rtol_fp64, perms, name_groups)
    if any(h == 2 for _, h in spec.heads.values()):  # two heads: the ties that kept their heads in place move
        residual = max(residual, _check(m, spec, x, torch.float64, rtol_fp64, draw(spec, gen, phase=1),
                                        name_groups)[0])
    m.float()  # exact: proof_state rounded every value to float32
    try:
        _check(m, spec, x, torch.float32, rtol, perms, name_groups, exact)
    finally:
        m.double()
    return residual


def _check(m: nn.Module, spec: PermutationSpec, x: torch.Tensor, dtype, tol: float, perms: dict,
           name_groups: bool, exact: list | None = None) -> tuple[float, list]:
    """(max |Δ| / scale, the unpermuted outputs) of ``m`` (already in ``dtype``); float32 is allowed ``tol`` or 10×
    its own rounding error on the unpermuted model (``exact``: the float64 outputs), whichever is larger: a
    permutation that is a symmetry only reorders sums, so it cannot move a float32 output by more than rounding
    does."""
    x = x.to(dtype)
    ref = _outputs(m, x)
    size = max((float(y.abs().max()) for y in ref), default=0.0)
    scale = _spread(ref, x.shape[0])
    if dtype is torch.float64 and scale <= 1e-9 * size:
        raise SpecProofError(f"the outputs of {spec.arch} do not depend on its input (spread {scale:.2e} over the "
                             f"proof's batch), so no permutation can be checked against them")
    if dtype is torch.float32:  # float32 rounding is relative to the outputs' size, not their spread
        scale = size or 1.0
        if exact is not None:
            tol = max(tol, 10 * _delta(ref, exact) / scale)

    def delta(p: dict) -> float:
        permute_in_place(spec, m, p)
        try:
            return _delta(_outputs(m, x), ref) / scale
        finally:
            permute_in_place(spec, m, inverse(p))

    worst = delta(perms)
    if worst <= tol:
        return worst, ref
    what = (f"the permutation spec of {spec.arch} is wrong: a random permutation changes the outputs by "
            f"{worst:.2e} × their scale in {str(dtype).removeprefix('torch.')} (allowed {tol:g})")
    if not name_groups:
        raise SpecProofError(what)
    ident = {g: torch.arange(n) for g, n in spec.sizes.items()}
    units = [(g, [g]) for g in spec.groups if g not in spec.heads and g not in spec.stacks] + \
        [(f"{tie} (heads)", groups) for tie, groups in ties(spec).items()]
    bad = [(u, delta(complete(spec, {**ident, **{g: perms[g] for g in groups}}))) for u, groups in units]
    listed = ", ".join(f"{g} (max |Δ| = {d:.2e} × output scale)" for g, d in bad if d > tol) or \
        "none alone (only jointly)"
    raise SpecProofError(f"{what}; failing groups: {listed}. Declare the module that breaks the symmetry in "
                         f"model.trace_overrides as 'fixed'")
