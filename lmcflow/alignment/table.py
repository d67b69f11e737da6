"""The permutation spec's table (``PermutationSpec``: which permutation group re-indexes each axis of each
``state_dict`` entry) and ``apply_permutation``, the one function that permutes tensors. Built by
``lmcflow.alignment.spec`` (lmcflow's architectures) and ``lmcflow.alignment.derive`` (any traced model).

Details: docs/internals.md, "`lmcflow.alignment.spec`".
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from lmcflow.alignment.heads import check_perms
from lmcflow.state import like_state


@dataclass
class PermutationSpec:
    """Which permutation group re-indexes each axis of each state_dict entry."""

    arch: str
    axes: dict  # state_dict key -> tuple[str | None, ...], one entry per tensor axis
    sizes: dict  # group -> number of units (insertion order = layer order)
    feature_indices: dict  # group -> tuple of indices into model.hidden_features(x)
    parameters: tuple  # trainable keys (the weight-matching objective runs over these)
    members: dict = field(default_factory=dict)  # group -> [(key, axis), …] over all keys
    # Specs derived from the traced graph (lmcflow.alignment.derive) only:
    feature_nodes: dict = field(default_factory=dict)  # group -> ((graph node, axis), …) activation matching reads
    fixed: dict = field(default_factory=dict)  # "key[axis]" of parameter axes kept in order -> why
    trace_overrides: dict = field(default_factory=dict)  # model.trace_overrides the graph was traced with
    proof_residual: float | None = None  # prove_spec's float64 max |Δ output| / output spread
    # Attention (lmcflow.alignment.heads): structured groups whose permutations keep heads whole
    heads: dict = field(default_factory=dict)  # head group -> (tie: the attention it belongs to, number of heads)
    stacks: dict = field(default_factory=dict)  # stacked group -> ((part group | None, units), …) along its axis

    def __post_init__(self):
        if not self.members:
            members = {g: [] for g in self.sizes}
            for key, ax in self.axes.items():
                for axis, g in enumerate(ax):
                    if g is not None:
                        members[g].append((key, axis))
            self.members = members

    @property
    def groups(self) -> tuple:
        return tuple(self.sizes)

    @property
    def feature_index(self) -> dict:
        """group -> the (last) ``hidden_features`` index whose channels it permutes."""
        return {g: idx[-1] for g, idx in self.feature_indices.items()}


def _check_perms(spec: PermutationSpec, perms: dict) -> None:
    missing = [g for g in spec.groups if g not in perms]
    extra = [g for g in perms if g not in spec.sizes]
    if missing or extra:
        raise KeyError(f"perms must name exactly the spec's groups; missing {missing}, unknown {extra}")
    for g, p in perms.items():
        n = spec.sizes[g]
        if p.shape != (n,) or not torch.equal(torch.sort(p.cpu()).values, torch.arange(n)):
            raise ValueError(f"perms[{g!r}] is not a permutation of {n} units")
    check_perms(spec, perms)


def apply_permutation(spec: PermutationSpec, state_dict: dict, perms: dict) -> dict:
    """New state_dict with every axis of group g re-indexed by ``perms[g]`` (see module doc); it keeps
    ``state_dict``'s ``_metadata`` (``lmcflow.state``)."""
    if state_dict.keys() != spec.axes.keys():
        a, b = set(state_dict), set(spec.axes)
        raise ValueError(f"state_dict and spec disagree: not in spec {sorted(a - b)[:5]}, "
                         f"missing from state_dict {sorted(b - a)[:5]}")
    _check_perms(spec, perms)
    out = {}
    for key, t in state_dict.items():
        new = t
        for axis, g in enumerate(spec.axes[key]):
            if g is not None:
                new = new.index_select(axis, perms[g].to(t.device))
        out[key] = new if new is not t else t.clone()
    return like_state(out, state_dict)


def permute_in_place(spec: PermutationSpec, module, perms: dict) -> None:
    """Re-index ``module``'s own parameters and buffers as ``apply_permutation`` re-indexes its state_dict, in place
    and without a copy of the model (one tensor's copy at a time; a tensor registered under several names is
    re-indexed once). ``inverse(perms)`` undoes it exactly (re-indexing moves values without arithmetic)."""
    sd = module.state_dict(keep_vars=True)
    if sd.keys() != spec.axes.keys():
        a, b = set(sd), set(spec.axes)
        raise ValueError(f"the module and the spec disagree: not in spec {sorted(a - b)[:5]}, "
                         f"missing from the module {sorted(b - a)[:5]}")
    _check_perms(spec, perms)
    done = set()
    with torch.no_grad():
        for key, t in sd.items():
            if id(t) in done or all(g is None for g in spec.axes[key]):
                continue
            done.add(id(t))
            new = t
            for axis, g in enumerate(spec.axes[key]):
                if g is not None:
                    new = new.index_select(axis, perms[g].to(t.device))
            t.copy_(new)


def inverse(perms: dict) -> dict:
    """{group: the inverse permutation}."""
    return {g: torch.argsort(p) for g, p in perms.items()}


def permute_except(t: torch.Tensor, ax: tuple, perms: dict, skip: int) -> torch.Tensor:
    for axis, g in enumerate(ax):
        if g is not None and axis != skip:
            t = t.index_select(axis, perms[g])
    return t
