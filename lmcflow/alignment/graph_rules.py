"""The op table of ``lmcflow.alignment.graph_axes``: for each traced node, which axes it joins and which it fixes
(functions and tensor methods here, leaf modules in ``graph_modules``; the table: docs/internals.md)."""
from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.nn.functional as F

from lmcflow.alignment.graph_axes import (
    _ACT_FUNCS,
    _ACT_METHODS,
    _BINARY_FUNCS,
    _BINARY_METHODS,
    _SHAPE_FUNCS,
    _UNARY_FUNCS,
    _UNARY_METHODS,
    _arg,
    _Rules,
    _shape,
)
from lmcflow.alignment.graph_modules import (
    _conv,
    _conv_activation_axes,
    _fix_tuple,
    _is_multi,
    _linear,
    _module_rule,
    _name,
    _override,
    _pool,
)


def apply_rule(r: _Rules, node: fx.Node) -> None:
    """Apply the node's rule; a rule that leaves a tensor argument unread refuses the node (nothing is ignored:
    an ignored mask or bias could hide a symmetry the model does not have)."""
    r.touched = set()
    n_before = len(r.unsupported)
    _apply_rule(r, node)
    returns_tensors = _shape(node) is not None or _is_multi(node)  # shape arithmetic reads shapes only
    ignored = r.ignored_args(node) if returns_tensors and node.op not in ("output", "get_attr") else []
    if ignored and len(r.unsupported) == n_before:
        r.unsupported_node(node, f"{_name(node)} with tensor argument(s) {ignored} its rule does not read")


def _apply_rule(r: _Rules, node: fx.Node) -> None:
    if node.op == "placeholder":
        if _shape(node) is not None:
            r.fix_node(node, "the model's input")
        return
    if node.op == "output":
        for a in node.all_input_nodes:
            if _shape(a) is not None:
                r.fix_node(a, "the model's output")
            elif _is_multi(a):
                _fix_tuple(r, a, "the model's output")
        return
    if node.op == "get_attr":
        shape = _shape(node)
        if shape is None:
            return
        if node.target in r.sd:
            r.param(node, node.target, [(d, d) for d in range(len(shape))])
        else:
            r.fix_node(node, f"{node.target} is a constant tensor outside the state_dict")
        return
    if node.op == "call_module":
        _module_rule(r, node, r.gm.get_submodule(node.target))
        return
    if _shape(node) is None and not _is_multi(node):
        if node.op == "call_function" and node.target is operator.getitem:
            return  # an entry of a shape or of a tuple that is not a tensor
        if node.op == "call_method" and node.target in ("size", "dim") or \
                node.op == "call_function" and node.target in _SHAPE_FUNCS:
            return
    name = node.name
    if name in r.overrides:
        _override(r, node, r.overrides[name])
    elif node.op == "call_function":
        _function_rule(r, node)
    elif node.op == "call_method":
        _method_rule(r, node)
    else:
        r.unsupported_node(node, str(node.target))


def _dims(node, i: int, name: str, ndim: int) -> list:
    d = _arg(node, i, name)
    if d is None:
        return list(range(ndim))
    return [x % ndim for x in (d if isinstance(d, (list, tuple)) else [d])]


def _reduce(r: _Rules, node, x) -> None:
    s_in = _shape(x)
    dims = _dims(node, 1, "dim", len(s_in))
    keep = _arg(node, 2, "keepdim", False)
    j = 0
    for d in range(len(s_in)):
        if d in dims:
            j += int(bool(keep))
            continue
        r.join(r.nax(x, d), r.nax(node, j), node)
        j += 1


def _index(r: _Rules, node, x) -> None:
    idx = node.args[1]
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(isinstance(i, fx.Node) or not (i is None or i is Ellipsis or isinstance(i, (int, slice))) for i in idx):
        r.unsupported_node(node, "tensor indexing with tensors or lists")
        return
    s_in = _shape(x)
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if Ellipsis in idx:
        k = idx.index(Ellipsis)
        idx = idx[:k] + (slice(None),) * (len(s_in) - n_real) + idx[k + 1:]
    idx = idx + (slice(None),) * (len(s_in) - sum(1 for i in idx if i is not None))
    d_in = d_out = 0
    why = f"{node.name}: indexing picks positions"
    for i in idx:
        if i is None:
            d_out += 1
            continue
        if isinstance(i, slice) and i == slice(None):
            r.join(r.nax(x, d_in), r.nax(node, d_out), node)
            d_out += 1
        elif isinstance(i, slice):
            r.uf.fix(r.nax(x, d_in), why)
            r.uf.fix(r.nax(node, d_out), why)
            d_out += 1
        else:
            r.uf.fix(r.nax(x, d_in), why)
        d_in += 1


def _cat(r: _Rules, node, stack: bool) -> None:
    tensors = list(_arg(node, 0, "tensors"))
    s = _shape(node)
    dim = _arg(node, 1, "dim", 0) % len(s)
    why = f"{node.name}: {'stack' if stack else 'cat'} along axis {dim} joins tensors into one axis"
    r.uf.fix(r.nax(node, dim), why)
    for t in tensors:
        for d in range(len(_shape(t))):
            dout = d + 1 if stack and d >= dim else d
            if d == dim and not stack:
                r.uf.fix(r.nax(t, d), why)
            else:
                r.join(r.nax(t, d), r.nax(node, dout), node)
    r.kinds[node.name] = "other"


def _matmul(r: _Rules, node, a, b) -> None:
    sa, sb, s = _shape(a), _shape(b), _shape(node)
    if len(sa) < 2 or len(sb) < 2:
        r.unsupported_node(node, "matmul of a vector")
        return
    r.join(r.nax(a, -1), r.nax(b, -2), node)
    r.join(r.nax(a, -2), r.nax(node, -2), node)
    r.join(r.nax(b, -1), r.nax(node, -1), node)
    for t, st in ((a, sa), (b, sb)):
        for i in range(3, len(st) + 1):
            if st[-i] == s[-i]:
                r.join(r.nax(t, -i), r.nax(node, -i), node)


def _axis_map(r: _Rules, node, x, perm) -> None:
    for d_out, d_in in enumerate(perm):
        r.join(r.nax(x, d_in), r.nax(node, d_out), node)


def _shape_op(r: _Rules, node, x, op: str) -> bool:
    n = len(_shape(x))
    if op == "permute":
        dims = node.args[1:] if len(node.args) > 2 else _arg(node, 1, "dims")
        _axis_map(r, node, x, [d % n for d in (dims if isinstance(dims, (list, tuple)) else [dims])])
    elif op == "transpose":
        d0, d1 = _arg(node, 1, "dim0") % n, _arg(node, 2, "dim1") % n
        p = list(range(n))
        p[d0], p[d1] = p[d1], p[d0]
        _axis_map(r, node, x, p)
    elif op in ("reshape", "view", "flatten", "unsqueeze", "squeeze", "unflatten"):
        r.reshape(x, node)
    elif op in ("expand", "expand_as"):
        r.broadcast(node, [x])
        s_in, s_out = _shape(x), _shape(node)
        for i in range(1, len(s_out) + 1):  # copies of one entry: nothing to permute
            if i > len(s_in) or s_in[-i] != s_out[-i]:
                r.uf.fix(r.nax(node, -i), f"{node.name}: expanded from one entry")
    else:
        return False
    r.kinds[node.name] = "other"
    return True


def _unbind(r: _Rules, node, x) -> None:
    """``unbind(dim)``: output i is ``x`` at position i of ``dim``, so the other axes pass through to every output
    and ``dim`` is fixed (its positions are picked, as an integer index picks one; timm's ``q, k, v =
    qkv.unbind(0)``)."""
    s_in = _shape(x)
    dim = _arg(node, 1, "dim", 0) % len(s_in)
    r.uf.fix(r.nax(x, dim), f"{node.name}: unbind picks positions")
    for i in range(s_in[dim]):
        for d_out, d in enumerate(d for d in range(len(s_in)) if d != dim):
            r.join(r.nax(x, d), r.uf.add(("n", f"{node.name}#{i}", d_out), s_in[d]), node)


def _function_rule(r: _Rules, node) -> None:
    f = node.target
    args = r.tensor_args(node)
    if f is operator.getitem:
        src = node.args[0]
        if _is_multi(src):
            i = node.args[1]
            for d in range(len(_shape(node))):
                r.join(r.uf.add(("n", f"{src.name}#{i}", d), _shape(node)[d]), r.nax(node, d), node)
        else:
            _index(r, node, src)
    elif f in _ACT_FUNCS:
        r.elementwise(node, "activation")
    elif f in _BINARY_FUNCS:
        residual = f in (operator.add, operator.iadd, torch.add) and len(args) == 2 and \
            _shape(args[0]) == _shape(args[1])
        r.elementwise(node, "residual" if residual else "other")
    elif f in _UNARY_FUNCS or _name(node) == "stochastic_depth":
        r.elementwise(node)
    elif f in (torch.flatten, torch.reshape, torch.permute, torch.transpose, torch.unsqueeze, torch.squeeze):
        _shape_op(r, node, args[0], _name(node))
    elif f in (torch.cat, torch.concat, torch.stack):
        _cat(r, node, f is torch.stack)
    elif f is torch.unbind:
        _unbind(r, node, args[0])
    elif f in (torch.mean, torch.sum, torch.amax):
        _reduce(r, node, args[0])
    elif f in (F.softmax, torch.softmax, F.log_softmax):
        r.elementwise(node)
    elif f in (torch.matmul, operator.matmul, torch.bmm):
        _matmul(r, node, *args[:2])
    elif f in (F.adaptive_avg_pool2d, F.adaptive_avg_pool1d, F.max_pool2d, F.avg_pool2d, F.max_pool1d,
               F.avg_pool1d, F.adaptive_max_pool2d, F.interpolate):  # interpolate: spatial mixing, like a pool
        _pool(r, node)
    elif f is F.linear:
        w, b = r.key_of(_arg(node, 1, "weight")), r.key_of(_arg(node, 2, "bias"))
        if w is None:
            _linear_nodes(r, node)
        else:
            _linear(r, node, node.args[0], w, b)
    elif f is F.conv2d or f is F.conv1d:
        w, b = r.key_of(_arg(node, 1, "weight")), r.key_of(_arg(node, 2, "bias"))
        _conv_nodes(r, node, w, b, _arg(node, 6, "groups", 1))
    elif f is F.layer_norm:
        x, s = node.args[0], _shape(node)
        n = len(_arg(node, 1, "normalized_shape"))
        r.same(x, node, node, [(d, d) for d in range(len(s))])
        for i, name in ((2, "weight"), (3, "bias")):
            p = _arg(node, i, name)
            if isinstance(p, fx.Node):
                r.same(node, p, node, [(len(s) - n + j, j) for j in range(n)])
        r.kinds[node.name] = "producer"
    elif f is F.scaled_dot_product_attention:
        q, k, v = node.args[:3]
        r.join(r.nax(q, -1), r.nax(k, -1), node)
        r.join(r.nax(k, -2), r.nax(v, -2), node)
        r.join(r.nax(v, -1), r.nax(node, -1), node)
        r.join(r.nax(q, -2), r.nax(node, -2), node)
        s = _shape(node)
        for t in (q, k, v):  # leading (batch, head) axes broadcast; the last two are the ones joined above
            st = _shape(t)
            for i in range(3, min(len(st), len(s)) + 1):
                if st[-i] == s[-i]:
                    r.join(r.nax(t, -i), r.nax(node, -i), node)
        mask = _arg(node, 3, "attn_mask")
        if isinstance(mask, fx.Node):
            _attention_mask(r, node, mask, q, k, _shape(node)[:-2])
    else:
        r.unsupported_node(node, f"{getattr(f, '__module__', '')}.{_name(node)}")


def _attention_mask(r: _Rules, node, mask, q, k, lead: tuple) -> None:
    """An additive or boolean mask over the logits (…, L, S): its last axes follow q's and k's sequence axes, its
    leading axes broadcast against ``lead`` (batch, heads)."""
    sm = _shape(mask)
    r.join(r.nax(mask, -1), r.nax(k, -2), node)
    if len(sm) > 1:
        r.join(r.nax(mask, -2), r.nax(q, -2), node)
    for i in range(3, len(sm) + 1):
        if i - 2 <= len(lead) and sm[-i] == lead[-(i - 2)]:
            r.join(r.nax(mask, -i), r.nax(node, -i), node)


def _linear_nodes(r: _Rules, node) -> None:
    """F.linear whose weight is computed (lmcflow's W_eff = mask⊙W + offset): the same joins through nodes."""
    x, w, b = node.args[0], _arg(node, 1, "weight"), _arg(node, 2, "bias")
    s = _shape(node)
    r.same(x, node, node, [(d, d) for d in range(len(s) - 1)])
    r.join(r.nax(x, -1), r.nax(w, 1), node)
    r.join(r.nax(node, -1), r.nax(w, 0), node)
    if isinstance(b, fx.Node):
        r.join(r.nax(node, -1), r.nax(b, 0), node)
    r.kinds[node.name] = "producer"


def _conv_nodes(r: _Rules, node, w_key, b_key, groups) -> None:
    x, w, b = node.args[0], _arg(node, 1, "weight"), _arg(node, 2, "bias")
    if w_key is not None:
        _conv(r, node, x, w_key, b_key, groups)
        return
    _conv_activation_axes(r, node, x)
    for d in range(2, len(_shape(w))):
        r.uf.fix(r.nax(w, d), f"{node.name}: kernel positions")
    r.join(r.nax(node, 1), r.nax(w, 0), node)
    if isinstance(b, fx.Node):
        r.join(r.nax(node, 1), r.nax(b, 0), node)
    if groups == 1:
        r.join(r.nax(x, 1), r.nax(w, 1), node)
    else:
        r.unsupported_node(node, "a grouped convolution with a computed weight")
    r.kinds[node.name] = "producer"


def _method_rule(r: _Rules, node) -> None:
    op = node.target
    args = r.tensor_args(node)
    x = node.args[0]
    if op in _ACT_METHODS:
        r.elementwise(node, "activation")
    elif op in _BINARY_METHODS:
        r.elementwise(node)
    elif op in _UNARY_METHODS:
        r.elementwise(node)
    elif _shape_op(r, node, x, op):
        return
    elif op in ("mean", "sum", "amax"):
        _reduce(r, node, x)
    elif op in ("softmax", "log_softmax"):
        r.elementwise(node)
    elif op in ("matmul", "bmm"):
        _matmul(r, node, *args[:2])
    elif op == "unbind":
        _unbind(r, node, x)
    elif op == "movedim":
        n = len(_shape(x))
        src, dst = _arg(node, 1, "source") % n, _arg(node, 2, "destination") % n
        order = [d for d in range(n) if d != src]
        order.insert(dst, src)
        _axis_map(r, node, x, order)
    else:
        r.unsupported_node(node, f"Tensor.{op}")
