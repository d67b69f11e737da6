"""Which tensor axes of a traced model must share one permutation: ``torch.fx`` traces the model, a real input
batch gives every node's shape, and union-find joins the axes each op ties together.

Every op either joins axes (a Linear ties its input's last axis to its weight's axis 1, its output's last axis to
weight axis 0 and the bias; elementwise ops tie equal axes after broadcasting; …), *fixes* axes it mixes in a way
no permutation of parameters can absorb (a conv's spatial axes, a flatten that merges channels with positions, the
axis of a ``cat``, the model's input and output), or is unsupported: then ``derive_axes`` raises one error listing
every such node. A class of axes that holds a parameter axis, is not fixed and has more than one unit becomes a
permutation group. Rules and the attention decision: docs/internals.md, "`lmcflow.alignment.graph_axes`".
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

OVERRIDES = ("fixed", "elementwise")

_ACTIVATIONS = (nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Hardswish, nn.Hardsigmoid, nn.Sigmoid, nn.Tanh,
                nn.LeakyReLU, nn.ELU, nn.Mish, nn.Softplus, nn.Hardtanh, nn.PReLU)
_PASS_MODULES = (nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)
_POOLS = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
          nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d, nn.AdaptiveMaxPool1d,
          nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)
_ACT_FUNCS = {F.relu, torch.relu, F.relu6, F.gelu, F.silu, F.hardswish, F.hardsigmoid, torch.sigmoid, F.sigmoid,
              torch.tanh, F.tanh, F.leaky_relu, F.elu, F.mish, F.softplus, F.hardtanh}
_ACT_METHODS = {"relu", "sigmoid", "tanh", "relu_", "sigmoid_", "tanh_"}
_UNARY_FUNCS = {F.dropout, operator.neg, torch.neg, torch.abs, torch.exp, torch.sqrt, torch.square}
_UNARY_METHODS = {"contiguous", "clone", "detach", "float", "to", "type_as", "abs", "exp", "sqrt", "neg", "square"}
_BINARY_FUNCS = {operator.add, operator.sub, operator.mul, operator.truediv, operator.iadd, operator.imul,
                 torch.add, torch.sub, torch.mul, torch.div, torch.maximum, torch.minimum}
_BINARY_METHODS = {"add", "sub", "mul", "div", "add_", "mul_", "sub_", "div_"}
_SHAPE_FUNCS = {getattr, operator.floordiv, operator.eq, operator.mul, torch._assert, len}


@dataclass
class AxisClasses:
    """Union-find over tensor axes: ("n", node, dim) for node outputs, ("p", state_dict key, dim) for tensors."""

    parent: dict = field(default_factory=dict)
    size: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)  # root -> why the class keeps its order

    def add(self, el, n: int):
        if el not in self.parent:
            self.parent[el] = el
            self.size[el] = n
        return el

    def find(self, el):
        while self.parent[el] != el:
            self.parent[el] = self.parent[self.parent[el]]
            el = self.parent[el]
        return el

    def join(self, a, b, where: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] != self.size[rb]:
            raise RuntimeError(f"{where}: joins axes of {self.size[ra]} and {self.size[rb]} units ({a}, {b}); "
                               f"this is a bug in lmcflow's graph rules")
        self.parent[rb] = ra
        if rb in self.fixed:
            self.fixed.setdefault(ra, self.fixed.pop(rb))

    def fix(self, el, why: str) -> None:
        self.fixed.setdefault(self.find(el), why)

    def is_fixed(self, el) -> bool:
        return self.find(el) in self.fixed


@dataclass
class GraphAxes:
    """The result of ``derive_axes``: the classes, the traced graph and what each node is."""

    classes: AxisClasses
    graph: fx.Graph
    kinds: dict  # node name -> "activation" | "residual" | "producer" | "other"
    order: list  # node names in graph order
    attention: list = field(default_factory=list)  # _Rules.attention
    split_heads: list = field(default_factory=list)  # resolve_splits: [(tie root, n_heads, [whole roots])]


class UnsupportedGraph(ValueError):
    pass


class _Tracer(fx.Tracer):
    def __init__(self, opaque: set):
        super().__init__()
        self.opaque = opaque

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return qualname in self.opaque or super().is_leaf_module(m, qualname)


def trace(model: nn.Module, overrides: dict | None = None) -> fx.GraphModule:
    """``torch.fx`` graph of ``model``; modules named in ``overrides`` stay single nodes."""
    tracer = _Tracer(set(overrides or {}))
    try:
        graph = tracer.trace(model)
    except Exception as err:  # fx raises many types (TraceError, TypeError, …) for untraceable code
        raise UnsupportedGraph(
            f"torch.fx cannot trace {type(model).__name__}: {type(err).__name__}: {err}. Data-dependent control "
            f"flow must be static; name the module that holds it in model.trace_overrides "
            f"({{'<module path>': 'fixed'}}) so it is kept whole") from err
    return fx.GraphModule(model, graph)


def _shape(node) -> tuple | None:
    meta = node.meta.get("tensor_meta") if isinstance(node, fx.Node) else None
    return tuple(meta.shape) if hasattr(meta, "shape") else None


class _Rules:
    def __init__(self, gm: fx.GraphModule, sd: dict, overrides: dict):
        self.gm, self.sd, self.overrides = gm, sd, overrides
        self.uf = AxisClasses()
        self.unsupported: list[str] = []
        self.kinds: dict[str, str] = {}
        self.root = type(gm).__name__  # derive_axes sets the model's class name
        self.touched: set = set()  # nodes whose axes the current rule read (every tensor argument must be)
        self.attention: list[dict] = []  # per attention op: its head-structured classes (graph_modules._mha)
        self.splits: list[tuple] = []  # (whole axis, major axis, minor axis, why) of 2-factor reshapes

    # ---------------------------------------------------------------- elements
    def nax(self, node, d: int):
        shape = _shape(node)
        if shape is None:
            raise UnsupportedGraph(f"{node.name}: expected a tensor (is it a tuple of tensors?)")
        d = d % len(shape)
        self.touched.add(node.name)
        return self.uf.add(("n", node.name, d), shape[d])

    def pax(self, key: str, d: int):
        t = self.sd[key]
        d = d % t.dim()
        return self.uf.add(("p", key, d), t.shape[d])

    def join(self, a, b, node) -> None:
        self.uf.join(a, b, node.name)

    def fix_node(self, node, why: str) -> None:
        shape = _shape(node)
        for d in range(len(shape or ())):
            self.uf.fix(self.nax(node, d), why)

    def same(self, a, b, node, dims) -> None:
        for da, db in dims:
            self.join(self.nax(a, da), self.nax(b, db), node)

    def tensor_args(self, node) -> list:
        return [a for a in node.all_input_nodes if _shape(a) is not None]

    def broadcast(self, node, inputs) -> None:
        out = _shape(node)
        for a in inputs:
            s = _shape(a)
            for i in range(1, len(s) + 1):
                if s[-i] == out[-i]:
                    self.join(self.nax(a, -i), self.nax(node, -i), node)

    def elementwise(self, node, kind="other") -> None:
        self.broadcast(node, self.tensor_args(node))
        self.kinds[node.name] = kind

    def param(self, node, key: str, dims) -> None:
        """Join node axes with the axes of state_dict entry ``key``: dims = [(node dim, key dim)]."""
        for dn, dk in dims:
            self.join(self.nax(node, dn), self.pax(key, dk), node)

    def key_of(self, node) -> str | None:
        if isinstance(node, fx.Node) and node.op == "get_attr" and node.target in self.sd:
            self.touched.add(node.name)  # read through its key: the get_attr node's axes are the key's
            return node.target
        return None

    def reshape(self, src, node) -> None:
        """Join axes that a reshape keeps whole; fix axes it merges or splits."""
        a, b = _shape(src), _shape(node)
        ia = [i for i, n in enumerate(a) if n != 1]
        ib = [j for j, n in enumerate(b) if n != 1]
        i = j = 0
        while i < len(ia) and j < len(ib):
            bi, bj = [ia[i]], [ib[j]]
            pa, pb = a[ia[i]], b[ib[j]]
            i, j = i + 1, j + 1
            while pa != pb:
                if pa < pb:
                    bi.append(ia[i])
                    pa *= a[ia[i]]
                    i += 1
                else:
                    bj.append(ib[j])
                    pb *= b[ib[j]]
                    j += 1
            if len(bi) == 1 and len(bj) == 1:
                self.join(self.nax(src, bi[0]), self.nax(node, bj[0]), node)
            elif sorted((len(bi), len(bj))) == [1, 2]:  # one axis <-> (heads, units per head): resolve_splits
                op = getattr(node.target, "__name__", str(node.target))
                why = f"{node.name}: {op} merges or splits axes {bi} of {a} into {bj} of {b}"
                whole, parts = ((src, bi[0]), [(node, d) for d in bj]) if len(bi) == 1 else \
                    ((node, bj[0]), [(src, d) for d in bi])
                self.splits.append((self.nax(*whole), self.nax(*parts[0]), self.nax(*parts[1]), why))
            else:
                op = getattr(node.target, "__name__", str(node.target))
                why = f"{node.name}: {op} merges or splits axes {bi} of {a} into {bj} of {b}"
                for d in bi:
                    self.uf.fix(self.nax(src, d), why)
                for d in bj:
                    self.uf.fix(self.nax(node, d), why)

    def ignored_args(self, node) -> list:
        """Tensor arguments of ``node`` (with an axis of more than one unit) its rule did not read."""
        return [a.name for a in node.all_input_nodes
                if a.name not in self.touched and any(n > 1 for n in (_shape(a) or ()))]

    def unsupported_node(self, node, what: str) -> None:
        owner = module_path(node)
        if owner == "-":
            where, override = f"{self.root}.forward (the model's own)", f"{{'{node.name}': 'fixed'}} (by node name)"
        else:
            where, override = owner, f"{{'{owner}': 'fixed'}}"
        self.unsupported.append(f"  {node.name}: module {where}, {node.op} {what}; override: {override}")


def module_path(node) -> str:
    """The path of the module that runs ``node``: its target for a module call, else the innermost module of its
    ``nn_module_stack`` whose forward called the function or method ("-" at the model's own top level)."""
    if node.op == "call_module":
        return node.target
    stack = node.meta.get("nn_module_stack") or {}
    return (next(reversed(stack.values()))[0] if stack else "") or "-"


def _arg(node, i: int, name: str, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def resolve_splits(uf: AxisClasses, splits: list) -> list:
    """Head splits written with reshape: an axis of H·d units that a reshape splits into (H, d) (or merges from)
    is a head group when the (heads, units) classes it splits into are free, hold no parameter axis, play one
    role each (heads or units), and every node axis of a units class sits on a tensor that also has that heads
    axis (so units may move differently in each head). Axes split into the same (heads, units) pair are joined
    (q's and k's projections: one permutation); each heads class is one tie. Any other split fixes its axes, as
    every reshape that merges or splits did before. Returns [(heads root, H, [whole-axis roots])]."""
    if not splits:
        return []
    while True:
        fixed_any = False
        heads = {uf.find(major) for _, major, _, _ in splits}
        units = {uf.find(minor) for _, _, minor, _ in splits}
        node_roots: dict = {}
        for el in uf.parent:
            if el[0] == "n":
                node_roots.setdefault(el[1], set()).add(uf.find(el))
        params = {uf.find(el) for el in uf.parent if el[0] != "n"}
        split_as: dict = {}
        for whole, major, minor, _ in splits:
            split_as.setdefault(uf.find(whole), set()).add((uf.find(major), uf.find(minor)))
        for whole, major, minor, why in splits:
            w, h, u = uf.find(whole), uf.find(major), uf.find(minor)
            bad = uf.is_fixed(whole) or uf.is_fixed(major) or uf.is_fixed(minor) or h == u or h in units or \
                u in heads or h in params or u in params or w in (h, u) or len(split_as[w]) > 1 or \
                any(u in roots and h not in roots for roots in node_roots.values())
            if bad and not (uf.is_fixed(whole) and uf.is_fixed(major) and uf.is_fixed(minor)):
                for el in (whole, major, minor):
                    uf.fix(el, why)
                fixed_any = True
        if not fixed_any:
            break
    pairs: dict = {}
    for whole, major, minor, why in splits:
        if not uf.is_fixed(whole):
            first = pairs.setdefault((uf.find(major), uf.find(minor)), whole)
            uf.join(first, whole, why)
    ties: dict = {}
    for (h, _), whole in pairs.items():
        ties.setdefault(h, []).append(uf.find(whole))
    return [(h, uf.size[h], wholes) for h, wholes in ties.items()]
