"""The permutation spec of a network: which permutation group re-indexes each axis of each ``state_dict`` entry,
and ``apply_permutation``, the one function that permutes tensors.

Details: docs/internals.md, "`lmcflow.alignment.spec`".
"""
from __future__ import annotations

import torch
from torch import nn

from lmcflow.alignment.derive import derived_spec, example_batch
from lmcflow.alignment.table import PermutationSpec, apply_permutation, permute_except
from lmcflow.models import MLP, VGG11, ResNet20

__all__ = ["PermutationSpec", "apply_permutation", "permute_except", "permutation_spec"]


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


_DERIVED: dict = {}  # architecture signature -> derived (and proven) spec


def _derived(model: nn.Module, example_input, overrides) -> PermutationSpec:
    overrides = dict(overrides if overrides is not None else getattr(model, "trace_overrides", None) or {})
    if example_input is None:
        shape = getattr(model, "example_input_shape", None)
        if shape is None:
            raise TypeError(f"the permutation spec of {type(model).__name__} is derived from its traced graph, "
                            f"which needs an input: pass example_input=<a batch> (or set "
                            f"model.example_input_shape, as lmcflow's model builder does)")
        example_input = example_batch(tuple(shape))
    sd = model.state_dict()
    key = (type(model).__qualname__, tuple((k, tuple(v.shape)) for k, v in sd.items()),
           tuple(example_input.shape[1:]), tuple(sorted(overrides.items())))
    if key not in _DERIVED:
        _DERIVED[key] = derived_spec(model, example_input, overrides)
    return _DERIVED[key]


def permutation_spec(model: nn.Module, extra_axes: dict | None = None, example_input: torch.Tensor | None = None,
                     trace_overrides: dict | None = None) -> PermutationSpec:
    """The permutation spec of ``model``: for ``MLP``, ``VGG11`` and ``ResNet20`` from lmcflow's layer rules (the
    group names and ``hidden_features`` indices the mechanism code reads; tests/test_derive.py checks the graph
    derivation gives the same groups), for any other model derived from its traced graph and proven
    (``lmcflow.alignment.derive``; ``example_input``: a batch, else ``model.example_input_shape``)."""
    if not isinstance(model, (MLP, VGG11, ResNet20)):
        if extra_axes:
            raise ValueError("extra_axes is for lmcflow's own architectures; a derived spec takes "
                             "trace_overrides ({'<module path>': 'fixed' | 'elementwise'})")
        return _derived(model, example_input, trace_overrides)
    _check_groupnorm(model)
    if isinstance(model, MLP):
        arch, lay = "mlp", _mlp_layout(model)
    elif isinstance(model, VGG11):
        arch, lay = "vgg11", _vgg_layout(model)
    else:
        arch, lay = "resnet20", _resnet_layout(model)
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
