"""The module rules of ``lmcflow.alignment.graph_rules``: Linear, Conv (grouped and depthwise), norm layers,
activations, pooling, flatten and ``nn.MultiheadAttention`` as leaf modules of the traced graph.

``nn.MultiheadAttention`` joins its embedding axes with the residual stream and puts the rows of q and k on one
class, the rows of v and ``out_proj``'s input columns on another; ``derive.derived_spec`` makes them head groups
of one tie (``lmcflow.alignment.heads``: whole heads move, units move within each head), and the packed
``in_proj_weight``/``in_proj_bias`` axis a stacked group of q, k and v.
"""
from __future__ import annotations

import torch.fx as fx
from torch import nn
from torch.nn.utils import parametrize

from lmcflow.alignment.graph_axes import (
    _ACTIVATIONS,
    _PASS_MODULES,
    _POOLS,
    _arg,
    _Rules,
    _shape,
)

_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)


def _is_multi(node) -> bool:
    """Whether the node returns a tuple of tensors (TensorMetadata is itself a named tuple)."""
    meta = node.meta.get("tensor_meta")
    return isinstance(meta, (tuple, list)) and not hasattr(meta, "shape")


def _name(node) -> str:
    return getattr(node.target, "__name__", str(node.target))


def _fix_tuple(r: _Rules, node, why: str) -> None:
    for i, meta in enumerate(node.meta["tensor_meta"]):
        for d, n in enumerate(getattr(meta, "shape", ())):
            r.uf.fix(r.uf.add(("n", f"{node.name}#{i}", d), n), why)


def _override(r: _Rules, node, how: str) -> None:
    if how == "elementwise":
        r.elementwise(node, "activation")
        return
    why = f"{node.name} is declared fixed (model.trace_overrides)"
    for a in r.tensor_args(node):
        r.fix_node(a, why)
    if _shape(node) is not None:
        r.fix_node(node, why)
    elif _is_multi(node):
        _fix_tuple(r, node, why)


def _per_channel(r: _Rules, node, path: str, m: nn.Module, channel: int) -> None:
    """Norm layers acting per channel: every axis passes through; the parameters follow the channel axis."""
    x = r.tensor_args(node)[0]
    r.same(x, node, node, [(d, d) for d in range(len(_shape(node)))])
    for leaf, t in list(m.named_parameters(recurse=False)) + list(m.named_buffers(recurse=False)):
        key = f"{path}.{leaf}"
        if key in r.sd and t.dim() == 1:
            r.param(node, key, [(channel, 0)])
    r.kinds[node.name] = "producer"


def _linear(r: _Rules, node, x, w_key, b_key, out_dim=-1) -> None:
    s = _shape(node)
    r.same(x, node, node, [(d, d) for d in range(len(s) - 1)])
    r.join(r.nax(x, -1), r.pax(w_key, 1), node)
    r.param(node, w_key, [(out_dim, 0)])
    if b_key:
        r.param(node, b_key, [(out_dim, 0)])
    r.kinds[node.name] = "producer"


def _conv_activation_axes(r: _Rules, node, x) -> None:
    """A convolution's input and output: spatial axes fixed (it mixes positions), the batch axes joined."""
    why = f"{node.name}: a convolution mixes spatial positions"
    for d in range(2, len(_shape(node))):
        r.uf.fix(r.nax(node, d), why)
        r.uf.fix(r.nax(x, d), why)
    r.join(r.nax(x, 0), r.nax(node, 0), node)


def _conv(r: _Rules, node, x, w_key, b_key, groups: int) -> None:
    s = _shape(node)
    _conv_activation_axes(r, node, x)
    c_in, c_out = _shape(x)[1], s[1]
    for d in range(2, r.sd[w_key].dim()):
        r.uf.fix(r.pax(w_key, d), f"{node.name}: kernel positions")
    r.param(node, w_key, [(1, 0)])
    if b_key:
        r.param(node, b_key, [(1, 0)])
    if groups == 1:
        r.join(r.nax(x, 1), r.pax(w_key, 1), node)
    elif groups == c_in == c_out:  # depthwise: output channel c reads input channel c only
        r.join(r.nax(x, 1), r.nax(node, 1), node)
    else:
        why = (f"{node.name}: a grouped convolution ({groups} groups, {c_in} -> {c_out} channels) allows only "
               f"permutations within and of whole groups, which a permutation group cannot express")
        r.uf.fix(r.nax(x, 1), why)
        r.uf.fix(r.nax(node, 1), why)
    r.kinds[node.name] = "producer"


def _pool(r: _Rules, node) -> None:
    x = r.tensor_args(node)[0]
    s = _shape(node)
    r.same(x, node, node, [(0, 0), (1, 1)] if len(s) > 2 else [(0, 0)])
    why = f"{node.name}: pooling mixes spatial positions"
    for d in range(2, len(s)):
        r.uf.fix(r.nax(node, d), why)
        r.uf.fix(r.nax(x, d), why)
    r.kinds[node.name] = "other"


def _mha(r: _Rules, node, path: str, m: nn.MultiheadAttention) -> None:
    """Embedding axes joined with the residual stream; q/k rows and v rows/``out_proj`` columns on two head-
    structured classes of the attention (module doc), recorded in ``r.attention`` for ``derived_spec``."""
    q = node.args[0] if node.args else node.kwargs["query"]
    k = _arg(node, 1, "key")
    v = _arg(node, 2, "value")
    seq, batch = (1, 0) if m.batch_first else (0, 1)
    outs = node.meta["tensor_meta"]

    def oax(d):
        d = d % len(outs[0].shape)
        return r.uf.add(("n", f"{node.name}#0", d), outs[0].shape[d])

    for d in (seq, batch):
        r.join(r.nax(q, d), oax(d), node)
    r.join(r.nax(q, batch), r.nax(k, batch), node)
    r.join(r.nax(k, seq), r.nax(v, seq), node)
    e = m.embed_dim
    qk, vo = r.uf.add(("h", path, "qk"), e), r.uf.add(("h", path, "vo"), e)
    packed = None
    if m._qkv_same_embed_dim:
        for t in (q, k, v):
            r.join(r.nax(t, -1), r.pax(f"{path}.in_proj_weight", 1), node)
        packed = r.pax(f"{path}.in_proj_weight", 0)
    else:
        for t, key, el in ((q, "q_proj_weight", qk), (k, "k_proj_weight", qk), (v, "v_proj_weight", vo)):
            r.join(r.nax(t, -1), r.pax(f"{path}.{key}", 1), node)
            r.join(r.pax(f"{path}.{key}", 0), el, node)
    if f"{path}.in_proj_bias" in r.sd:  # (3E,) in either form
        bias = r.pax(f"{path}.in_proj_bias", 0)
        if packed is not None:
            r.join(packed, bias, node)
        packed = bias if packed is None else packed
    for key, el in (("bias_k", qk), ("bias_v", vo)):  # (1, 1, E): an extra key / value row after projection
        if f"{path}.{key}" in r.sd:
            r.join(r.pax(f"{path}.{key}", -1), el, node)
    if _mha_masks(r, node, path, q, k, seq, batch):
        r.uf.fix(qk, f"{path}: a 3-d attention mask is given per head, so the heads keep their order")
        r.uf.fix(vo, f"{path}: a 3-d attention mask is given per head, so the heads keep their order")
    r.join(r.pax(f"{path}.out_proj.weight", 1), vo, node)
    r.join(oax(-1), r.pax(f"{path}.out_proj.weight", 0), node)
    if f"{path}.out_proj.bias" in r.sd:
        r.join(oax(-1), r.pax(f"{path}.out_proj.bias", 0), node)
    if len(outs) > 1 and hasattr(outs[1], "shape"):
        for d, n in enumerate(outs[1].shape):
            r.uf.fix(r.uf.add(("n", f"{node.name}#1", d), n), f"{path}: the attention weights")
        if len(outs[1].shape) == 4 or not _arg(node, 6, "average_attn_weights", True):  # per-head weights out
            why = f"{path}: returns per-head attention weights, so its heads keep their order"
            r.uf.fix(qk, why)
            r.uf.fix(vo, why)
    r.attention.append({"path": path, "heads": m.num_heads, "qk": qk, "vo": vo, "packed": packed})
    r.kinds[node.name] = "producer"


def _mha_masks(r: _Rules, node, path: str, q, k, seq: int, batch: int) -> bool:
    """``key_padding_mask`` (N, S) follows the batch and key positions; ``attn_mask`` (L, S) the query and key
    positions, and a 3-d one (N·heads, L, S) keeps its first axis (it merges batch and heads). Returns whether
    the mask is given per head."""
    kpm, mask = _arg(node, 3, "key_padding_mask"), _arg(node, 5, "attn_mask")
    if isinstance(kpm, fx.Node):
        r.join(r.nax(kpm, -1), r.nax(k, seq), node)
        if len(_shape(kpm)) == 2:
            r.join(r.nax(kpm, 0), r.nax(q, batch), node)
    if isinstance(mask, fx.Node):
        r.join(r.nax(mask, -1), r.nax(k, seq), node)
        r.join(r.nax(mask, -2), r.nax(q, seq), node)
        if len(_shape(mask)) == 3:
            r.uf.fix(r.nax(mask, 0), f"{path}: a 3-d attention mask merges the batch and the heads")
            return True
    return False


def _hidden_computation(m: nn.Module) -> str:
    """What computes a module's tensors outside its traced call: a parametrization (weight norm, spectral norm
    of torch.nn.utils.parametrizations) or a forward hook (their older hook-based forms)."""
    if parametrize.is_parametrized(m):
        return "a parametrization (" + ", ".join(sorted(m.parametrizations.keys())) + ")"
    hooks = list(m._forward_pre_hooks.values()) + list(m._forward_hooks.values())
    if hooks:
        return "a forward hook (" + ", ".join(sorted({type(h).__name__ for h in hooks})) + ")"
    return ""


def _module_rule(r: _Rules, node, m: nn.Module) -> None:
    path = node.target
    how = r.overrides.get(path)
    if how:
        _override(r, node, how)
        return
    hidden = _hidden_computation(m)
    if hidden:
        r.unsupported_node(node, f"{type(m).__name__} whose weights are computed by {hidden} (state_dict keys "
                                 f"{sorted(k for k in r.sd if k.startswith(path + '.'))[:4]}), which the graph does "
                                 f"not show; remove it before deriving (torch.nn.utils.parametrize."
                                 f"remove_parametrizations, remove_weight_norm, remove_spectral_norm)")
        return
    t = type(m)
    x = r.tensor_args(node)[0] if r.tensor_args(node) else None
    has_bias = getattr(m, "bias", None) is not None
    if t is nn.Linear or (isinstance(m, nn.Linear) and t.forward is nn.Linear.forward):
        _linear(r, node, x, f"{path}.weight", f"{path}.bias" if has_bias else None)
    elif t in (nn.Conv1d, nn.Conv2d, nn.Conv3d) and m.padding_mode == "zeros":
        _conv(r, node, x, f"{path}.weight", f"{path}.bias" if has_bias else None, m.groups)
    elif t in _NORMS:
        _per_channel(r, node, path, m, 1)
    elif t is nn.GroupNorm:
        if m.num_groups not in (1, m.num_channels):
            r.unsupported_node(node, f"GroupNorm({m.num_groups}, {m.num_channels}): normalises groups of "
                                     f"channels together, so a channel permutation changes it (use 1 group)")
            return
        _per_channel(r, node, path, m, 1)
    elif t is nn.LayerNorm:
        n = len(m.normalized_shape)
        s = _shape(node)
        r.same(x, node, node, [(d, d) for d in range(len(s))])
        for leaf in ("weight", "bias"):
            if getattr(m, leaf, None) is not None:
                r.param(node, f"{path}.{leaf}", [(len(s) - n + i, i) for i in range(n)])
        r.kinds[node.name] = "producer"
    elif t in _ACTIVATIONS and not (t is nn.PReLU and m.num_parameters > 1):
        r.elementwise(node, "activation")
        if t is nn.PReLU:
            r.uf.fix(r.pax(f"{path}.weight", 0), f"{path}: a single PReLU slope")
    elif t in _PASS_MODULES:
        r.elementwise(node)
    elif t in _POOLS:
        _pool(r, node)
    elif t is nn.Flatten:
        r.reshape(x, node)
    elif t in (nn.Softmax, nn.LogSoftmax):
        r.elementwise(node)
    elif t is nn.MultiheadAttention:
        _mha(r, node, path, m)
    else:
        r.unsupported_node(node, f"{t.__module__}.{t.__name__}")


