"""Permutation alignment of two networks (Git Re-Basin style).

Permutation spec
----------------
``permutation_spec(model)`` returns one declarative table, ``spec.axes``, that maps
every ``state_dict`` key (parameters *and* buffers: BatchNorm running statistics,
symmetry-breaking masks/offsets…) to a tuple with one entry per tensor axis: the
name of the permutation group that re-indexes that axis, or ``None``. Every
method (identity, weight matching, activation matching, random permutation)
produces a ``perms`` dict ``group -> LongTensor`` and applies it through the one
function ``apply_permutation``; nothing else permutes tensors.

Rules used to build the table (a key that matches no rule raises ``ValueError``,
so nothing is silently left unpermuted):

* weight layer ``m`` (Linear/Conv) with output group ``o`` and input group ``i``:
  ``m.weight -> (o, i, None, …)``, ``m.bias -> (o,)``; any other entry ``m.<x>``
  whose shape equals ``m.weight``'s (e.g. ``m.mask``, ``m.offset`` added by
  ``lmcflow.symmetry``) gets the weight's axes; 0-dim entries get ``()``.
* norm layer with group ``g`` (BatchNorm, LayerNorm, GroupNorm with one group):
  every 1-D entry of length ``n_g`` (weight, bias, running_mean, running_var)
  gets ``(g,)``; 0-dim entries (``num_batches_tracked``) get ``()``. The same
  rule covers the per-unit gate modules of each hidden layer (``gates.{i}``,
  ``stages.{s}.{b}.gate``): a 1-D entry of a gate is taken to be per unit.
* σ-asymmetric gate x ↦ sigmoid(Cx)⊙x with its fixed n×n matrix C (``gates.{i}.C``): both axes
  get the layer's group, ``(g, g)``, since a permuted B computes the same function only with
  C' = P C Pᵀ. The gate is fixed and shared by A and B, so an aligned B carries a different C
  than A, and the aligned path interpolates C as well: it leaves the σ-asymmetric family (the
  unaligned path, where C_A = C_B, stays in it). A group may appear on two axes of such a fixed
  buffer; never of a trainable parameter (weight matching needs distinct groups there).
  GroupNorm with more than one group is not permutation invariant: the spec
  builder raises ``ValueError``.
* ``extra_axes={key: axes}`` overrides/extends the table for layers this module
  does not know.

Groups, and their ``hidden_features`` indices
---------------------------------------------
``spec.feature_indices[g]`` lists every index ``j`` of ``model.hidden_features(x)``
whose channel axis (dim 1) is permuted by group ``g``; ``spec.feature_index[g]``
is the last of them (the one a single-feature consumer should use).

* MLP (depth L): group ``hidden{i}`` = output units of ``layers.{i}``
  (+ ``norms.{i}``), i = 0…L−1; ``feature_index[hidden{i}] = i``. The first layer's
  input axis and the head's output axis are never permuted.
* VGG-11: group ``hidden{i}`` = output channels of ``convs.{i}`` (+ ``norms.{i}``),
  i = 0…7; ``feature_index[hidden{i}] = i``. The head reads the last group.
* ResNet-20: ``hidden_features`` is [stem output, then per block k = 3s+b
  (stage s, block b): interior (2k+1), block output (2k+2)].
  - ``stage{s}`` (residual stream of stage s, shared by the stem (s=0), every
    ``conv2``/``norm2`` of the stage and the stage's 1x1 shortcut):
    ``feature_indices = ([0] if s == 0 else []) + [2k+2 for the stage's blocks]``,
    ``feature_index = 2(3s+2)+2`` (the stage's last block output).
  - ``stage{s}.block{b}`` (block interior: ``conv1``/``norm1`` out, ``conv2`` in):
    ``feature_index = 2(3s+b)+1``.

Permutation convention
----------------------
``perms[g][i] = j`` means: after ``apply_permutation``, unit ``i`` of the permuted
model B is unit ``j`` of the original B (``tensor.index_select(axis, perms[g])``).
The matching methods choose ``perms[g][i]`` = the unit of B matched to unit ``i``
of A, so the permuted B can be interpolated with A directly.

Methods (each returns ``(perms, info)`` with ``info = {objective, iterations,
seconds, …}``):

* ``identity``: no permutation (the un-aligned baseline).
* ``weight_matching``: maximise ``J(P) = Σ_k <W_a[k], π_P(W_b[k])>`` over the
  trainable parameters ``k`` (Frobenius inner product, float64), by coordinate
  descent over groups as in Git Re-Basin (Ainsworth et al., 2023, Alg. 2): each
  step solves one linear assignment problem for one group with the others fixed;
  the group order is a fresh random permutation per sweep (seeded); a step is
  taken only if it strictly increases J; stop after a sweep with no improvement
  or after ``max_iter`` sweeps. ``info["objective_history"]`` holds J at the
  start and after every sweep (non-decreasing by construction).
* ``activation_matching``: for each group, the Pearson correlation matrix
  ``C[i, j] = corr(unit i of A, unit j of B)`` (``lmcflow.correlation``; conv
  pixels count as samples), averaged over the group's ``feature_indices``; one
  linear assignment maximising ``Σ_i C[i, perm[i]]``. Objective = mean matched
  correlation over all units of all groups (pooled, not per-group average).
* ``random_permutation``: an independent uniformly random permutation per group
  (function preserving; the control).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from scipy.optimize import linear_sum_assignment
from torch import nn

from lmcflow.correlation import feature_correlations
from lmcflow.io import load_tensors, save_tensors
from lmcflow.seeding import generator

METHODS = ("identity", "weight_matching", "activation_matching", "random_permutation")


@dataclass
class PermutationSpec:
    """Which permutation group re-indexes each axis of each state_dict entry."""

    arch: str
    axes: dict  # state_dict key -> tuple[str | None, ...], one entry per tensor axis
    sizes: dict  # group -> number of units (insertion order = layer order)
    feature_indices: dict  # group -> tuple of indices into model.hidden_features(x)
    parameters: tuple  # trainable keys (the weight-matching objective runs over these)
    members: dict = field(default_factory=dict)  # group -> [(key, axis), …] over all keys

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


# --------------------------------------------------------------------------- spec builders
class _Layout:
    def __init__(self):
        self.weights: dict[str, tuple] = {}  # module -> (out_group, in_group)
        self.norms: dict[str, str] = {}  # module -> group
        self.features: dict[str, list] = {}  # group -> hidden_features indices

    def feature(self, group: str, index: int) -> None:
        self.features.setdefault(group, []).append(index)


def _chain_layout(layers: str, n: int) -> _Layout:
    """A plain chain of ``n`` weight layers (MLP ``layers.i``, VGG ``convs.i``), each with its norm and gate."""
    lay = _Layout()
    prev = None
    for i in range(n):
        g = f"hidden{i}"
        lay.weights[f"{layers}.{i}"] = (g, prev)
        lay.norms[f"norms.{i}"] = g
        lay.norms[f"gates.{i}"] = g
        lay.feature(g, i)
        prev = g
    lay.weights["head"] = (None, prev)
    return lay


def _mlp_layout(model) -> _Layout:
    return _chain_layout("layers", len(model.layers))


def _vgg_layout(model) -> _Layout:
    return _chain_layout("convs", len(model.convs))


def _resnet_layout(model) -> _Layout:
    lay = _Layout()
    stream = "stage0"
    lay.weights["stem"] = (stream, None)
    lay.norms["stem_norm"] = stream
    lay.feature(stream, 0)
    k = 0
    for s, blocks in enumerate(model.stages):
        out = f"stage{s}"
        for b, block in enumerate(blocks):
            inner = f"stage{s}.block{b}"
            p = f"stages.{s}.{b}"
            lay.weights[f"{p}.conv1"] = (inner, stream)
            lay.norms[f"{p}.norm1"] = inner
            lay.norms[f"{p}.gate"] = inner
            lay.weights[f"{p}.conv2"] = (out, inner)
            lay.norms[f"{p}.norm2"] = out
            if block.shortcut is not None:
                lay.weights[f"{p}.shortcut.0"] = (out, stream)
                lay.norms[f"{p}.shortcut.1"] = out
            elif stream != out:
                raise ValueError(f"{p} has an identity shortcut between groups {stream} and {out}; "
                                 f"the ResNet-20 permutation spec needs a 1x1 shortcut at stage changes")
            lay.feature(inner, 2 * k + 1)
            lay.feature(out, 2 * k + 2)
            stream = out
            k += 1
    lay.weights["head"] = (None, stream)
    return lay


def _check_groupnorm(model: nn.Module) -> None:
    for name, m in model.named_modules():
        if isinstance(m, nn.GroupNorm) and m.num_groups != 1:
            raise ValueError(
                f"{name}: GroupNorm with {m.num_groups} groups over {m.num_channels} channels is not invariant "
                f"under channel permutations, so models with it cannot be aligned. Use model.norm_groups=1 "
                f"(GroupNorm(1, C), a LayerNorm over C,H,W) or batchnorm.")


def permutation_spec(model: nn.Module, extra_axes: dict | None = None) -> PermutationSpec:
    """Build the permutation spec of an ``MLP``, ``VGG11`` or ``ResNet20`` instance."""
    from lmcflow.models import (  # local: models imports nothing from here
        MLP,
        VGG11,
        ResNet20,
    )

    _check_groupnorm(model)
    if isinstance(model, MLP):
        arch, lay = "mlp", _mlp_layout(model)
    elif isinstance(model, VGG11):
        arch, lay = "vgg11", _vgg_layout(model)
    elif isinstance(model, ResNet20):
        arch, lay = "resnet20", _resnet_layout(model)
    else:
        raise TypeError(f"no permutation spec for {type(model).__name__}; known: MLP, VGG11, ResNet20")
    extra_axes = dict(extra_axes or {})
    sd = model.state_dict()
    axes: dict[str, tuple] = {}
    for key, t in sd.items():
        if key in extra_axes:
            axes[key] = tuple(extra_axes.pop(key))
            continue
        prefix, _, leaf = key.rpartition(".")
        if prefix in lay.weights:
            out_g, in_g = lay.weights[prefix]
            w = sd.get(f"{prefix}.weight")
            w_axes = None if w is None else (out_g, in_g) + (None,) * (w.dim() - 2)
            if leaf == "weight":
                axes[key] = w_axes
            elif leaf == "bias" and t.dim() == 1:
                axes[key] = (out_g,)
            elif w is not None and t.shape == w.shape:
                axes[key] = w_axes  # symmetry-breaking mask/offset etc.
            elif t.dim() == 0:
                axes[key] = ()
            else:
                raise ValueError(f"state_dict entry {key!r} (shape {tuple(t.shape)}) of weight layer {prefix!r} "
                                 f"matches no permutation rule (weight shape "
                                 f"{None if w is None else tuple(w.shape)}); pass extra_axes={{{key!r}: …}}")
        elif prefix in lay.norms:
            if t.dim() == 0:
                axes[key] = ()
            elif t.dim() == 1:
                axes[key] = (lay.norms[prefix],)
            elif t.dim() == 2 and t.shape[0] == t.shape[1] and leaf == "C":  # σ-asymmetric gate matrix
                axes[key] = (lay.norms[prefix],) * 2
            else:
                raise ValueError(f"state_dict entry {key!r} (shape {tuple(t.shape)}) of norm/gate layer "
                                 f"{prefix!r} matches no permutation rule; pass extra_axes={{{key!r}: …}}")
        else:
            raise ValueError(f"state_dict entry {key!r} (shape {tuple(t.shape)}) belongs to no layer the "
                             f"{arch} permutation spec knows; pass extra_axes={{{key!r}: …}}")
    if extra_axes:
        raise ValueError(f"extra_axes names keys not in the state_dict: {sorted(extra_axes)}")
    sizes: dict[str, int] = {g: 0 for g in lay.features}
    trainable = {k for k, _ in model.named_parameters()}
    for key, ax in axes.items():
        t = sd[key]
        if len(ax) != t.dim():
            raise ValueError(f"{key}: {len(ax)} axes declared for a {t.dim()}-d tensor")
        named = [g for g in ax if g is not None]
        if len(named) != len(set(named)) and key in trainable:
            raise ValueError(f"{key}: group used on two axes {ax}; weight matching needs distinct groups")
        for axis, g in enumerate(ax):
            if g is None:
                continue
            if g not in sizes:
                raise ValueError(f"{key}: group {g!r} has no hidden feature")
            if sizes[g] == 0:
                sizes[g] = t.shape[axis]
            elif sizes[g] != t.shape[axis]:
                raise ValueError(f"{key}: axis {axis} has {t.shape[axis]} units but group {g!r} has {sizes[g]}")
    unused = [g for g, n in sizes.items() if n == 0]
    if unused:
        raise ValueError(f"groups {unused} permute no tensor")
    params = tuple(k for k, _ in model.named_parameters() if k in axes)
    return PermutationSpec(arch=arch, axes=axes, sizes=sizes,
                           feature_indices={g: tuple(v) for g, v in lay.features.items()}, parameters=params)


# --------------------------------------------------------------------------- applying
def _check_perms(spec: PermutationSpec, perms: dict) -> None:
    missing = [g for g in spec.groups if g not in perms]
    extra = [g for g in perms if g not in spec.sizes]
    if missing or extra:
        raise KeyError(f"perms must name exactly the spec's groups; missing {missing}, unknown {extra}")
    for g, p in perms.items():
        n = spec.sizes[g]
        if p.shape != (n,) or not torch.equal(torch.sort(p.cpu()).values, torch.arange(n)):
            raise ValueError(f"perms[{g!r}] is not a permutation of {n} units")


def apply_permutation(spec: PermutationSpec, state_dict: dict, perms: dict) -> dict:
    """New state_dict with every axis of group g re-indexed by ``perms[g]`` (see module doc)."""
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
    return out


def _permute_except(t: torch.Tensor, ax: tuple, perms: dict, skip: int) -> torch.Tensor:
    for axis, g in enumerate(ax):
        if g is not None and axis != skip:
            t = t.index_select(axis, perms[g])
    return t


def weight_matching_objective(spec: PermutationSpec, sd_a: dict, sd_b: dict, perms: dict,
                              keys=None) -> float:
    """J(P) = Σ_k <W_a[k], π_P(W_b[k])> in float64 over ``keys`` (default: trainable parameters)."""
    keys = spec.parameters if keys is None else keys
    total = 0.0
    for k in keys:
        a = sd_a[k].double()
        b = _permute_except(sd_b[k].double(), spec.axes[k], {g: p.to(a.device) for g, p in perms.items()}, -1)
        total += float((a * b).sum())
    return total


def identity(spec: PermutationSpec) -> tuple[dict, dict]:
    perms = {g: torch.arange(n) for g, n in spec.sizes.items()}
    return perms, {"objective": float("nan"), "iterations": 0, "seconds": 0.0}


def random_permutation(spec: PermutationSpec, seed: int) -> tuple[dict, dict]:
    """Independent uniform permutation per group, from ``generator("random_permutation", seed)``."""
    t0 = time.perf_counter()
    g = generator("random_permutation", seed)
    perms = {grp: torch.randperm(n, generator=g) for grp, n in spec.sizes.items()}
    return perms, {"objective": float("nan"), "iterations": 0, "seconds": time.perf_counter() - t0}


@torch.no_grad()
def weight_matching(spec: PermutationSpec, sd_a: dict, sd_b: dict, max_iter: int = 100, seed: int = 0,
                    dtype: torch.dtype = torch.float64) -> tuple[dict, dict]:
    """Git Re-Basin weight matching (coordinate descent over groups; see module doc)."""
    t0 = time.perf_counter()
    keys = spec.parameters
    device = sd_a[keys[0]].device
    wa = {k: sd_a[k].to(device=device, dtype=dtype) for k in keys}
    wb = {k: sd_b[k].to(device=device, dtype=dtype) for k in keys}
    keyset = set(keys)
    members = {g: [(k, ax) for k, ax in spec.members[g] if k in keyset] for g in spec.groups}
    groups = [g for g in spec.groups if members[g]]
    perms = {g: torch.arange(n, device=device) for g, n in spec.sizes.items()}

    def objective() -> float:
        return float(sum((wa[k] * _permute_except(wb[k], spec.axes[k], perms, -1)).sum() for k in keys))

    gen = generator("weight_matching", seed)
    history = [objective()]
    sweeps = 0
    for _ in range(max_iter):
        sweeps += 1
        improved = False
        for gi in torch.randperm(len(groups), generator=gen).tolist():
            grp = groups[gi]
            n = spec.sizes[grp]
            cost = torch.zeros(n, n, dtype=dtype, device=device)
            for k, axis in members[grp]:
                a = wa[k].movedim(axis, 0).reshape(n, -1)
                b = _permute_except(wb[k], spec.axes[k], perms, axis).movedim(axis, 0).reshape(n, -1)
                cost += a @ b.T
            _, col = linear_sum_assignment(cost.cpu().numpy(), maximize=True)
            new = torch.as_tensor(col, dtype=torch.long, device=device)
            rows = torch.arange(n, device=device)
            old_score = float(cost[rows, perms[grp]].sum())
            new_score = float(cost[rows, new].sum())
            if new_score > old_score + 1e-12 * max(1.0, abs(old_score)):
                perms[grp] = new
                improved = True
        history.append(objective())
        if not improved:
            break
    info = {"objective": history[-1], "iterations": sweeps, "seconds": time.perf_counter() - t0,
            "objective_history": history}
    return {g: p.cpu() for g, p in perms.items()}, info


@torch.no_grad()
def activation_matching(model_a: nn.Module, model_b: nn.Module, spec: PermutationSpec, x: torch.Tensor,
                        batch_size: int = 500) -> tuple[dict, dict]:
    """Match units by the Pearson correlation of their activations on ``x`` (see module doc)."""
    t0 = time.perf_counter()
    device = next(iter(model_a.state_dict().values())).device
    corrs = feature_correlations(model_a, model_b, x.to(device), batch_size=batch_size)
    perms, per_group = {}, {}
    total, count = 0.0, 0
    for grp, idx in spec.feature_indices.items():
        c = torch.stack([corrs[i].double().cpu() for i in idx]).mean(0)
        if c.shape != (spec.sizes[grp],) * 2:
            raise ValueError(f"group {grp}: correlation matrix {tuple(c.shape)} does not match "
                             f"{spec.sizes[grp]} units; hidden_features and the spec disagree")
        _, col = linear_sum_assignment(c.numpy(), maximize=True)
        perms[grp] = torch.as_tensor(col, dtype=torch.long)
        matched = c[torch.arange(len(col)), perms[grp]]
        per_group[grp] = float(matched.mean())
        total += float(matched.sum())
        count += len(col)
    info = {"objective": total / count, "iterations": 1, "seconds": time.perf_counter() - t0,
            "per_group": per_group}
    return perms, info


def align(method: str, model_a: nn.Module, model_b: nn.Module, x_train: torch.Tensor | None = None,
          seed: int = 0, **kw) -> tuple[dict, dict]:
    """Permutations of model B that align it to model A with ``method`` (one of ``METHODS``).

    ``kw``: weight_matching takes ``max_iter``; activation_matching takes ``batch_size``.
    Apply the result with ``apply_permutation(permutation_spec(model_b), model_b.state_dict(), perms)``.
    """
    if method not in METHODS:
        raise ValueError(f"alignment method {method!r} is unknown; allowed: {', '.join(METHODS)}")
    spec = permutation_spec(model_a)
    spec_b = permutation_spec(model_b)
    if spec.axes != spec_b.axes or spec.sizes != spec_b.sizes:
        raise ValueError("models A and B have different architectures or widths; they cannot be aligned")
    if method == "identity":
        return identity(spec)
    if method == "random_permutation":
        return random_permutation(spec, seed)
    if method == "weight_matching":
        return weight_matching(spec, model_a.state_dict(), model_b.state_dict(), seed=seed, **kw)
    if x_train is None:
        raise ValueError("activation_matching needs x_train")
    return activation_matching(model_a, model_b, spec, x_train, **kw)


# --------------------------------------------------------------------------- symmetry-breaking layers
def has_asymmetric_layers(model: nn.Module) -> bool:
    from lmcflow.symmetry import is_asymmetric

    return any(is_asymmetric(m) for m in model.modules())


def to_dense_form(model: nn.Module) -> bool:
    """Load ``effective_state_dict(model)`` into ``model`` in place if it has symmetry-breaking layers.

    W-asymmetric / SyRe layers keep W_eff = mask⊙W + offset with a fixed mask and offset; permuting
    the stored W alone would move trainable entries onto fixed positions. In the dense form
    (weight = W_eff, mask = 1, offset = 0) the model computes the same function, weight matching
    reads W_eff, and permutation plus interpolation act on W_eff. Returns True if converted.
    """
    if not has_asymmetric_layers(model):
        return False
    from lmcflow.symmetry import effective_state_dict

    model.load_state_dict(effective_state_dict(model))
    return True


# --------------------------------------------------------------------------- storage
def save_permutation_sets(path, sets: dict, info: dict) -> str:
    """Save {(seed_a, seed_b): {group: perm}} as int64 tensors ``pair-<a>-<b>/<group>`` with ``info`` as
    metadata; returns the file's SHA-256."""
    tensors = {f"pair-{a}-{b}/{g}": p.to(torch.int64) for (a, b), perms in sets.items() for g, p in perms.items()}
    return save_tensors(path, tensors, {**info, "pairs": [list(k) for k in sets]})


def load_permutation_sets(path, expected_sha256: str | None = None) -> tuple[dict, dict]:
    """({(seed_a, seed_b): {group: perm}}, metadata) of a file written by ``save_permutation_sets``."""
    tensors, info = load_tensors(path, expected_sha256, rebuild_hint="rule align")
    sets: dict = {}
    for key, value in tensors.items():
        pair, group = key.split("/", 1)
        _, a, b = pair.split("-")
        sets.setdefault((int(a), int(b)), {})[group] = value
    return sets, info


__all__ = ["METHODS", "PermutationSpec", "permutation_spec", "apply_permutation", "identity",
           "weight_matching", "weight_matching_objective", "activation_matching", "random_permutation",
           "align", "save_permutation_sets", "load_permutation_sets", "has_asymmetric_layers", "to_dense_form"]
