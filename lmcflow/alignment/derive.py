"""The permutation spec of any traceable model, derived from its graph (``graph_axes``), proven when it is built
(``prove_spec``: a random permutation of every group leaves the outputs unchanged), and the features activation
matching reads at the graph nodes that define each group (``node_feature_moments``).

Details: docs/internals.md, "`lmcflow.alignment.derive`".
"""
from __future__ import annotations

import torch
import torch.fx as fx
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from lmcflow.alignment.graph_axes import OVERRIDES, GraphAxes, UnsupportedGraph, _Rules, resolve_splits, trace
from lmcflow.alignment.graph_rules import apply_rule
from lmcflow.alignment.proof import PROOF_RTOL, SpecProofError, prove_spec
from lmcflow.alignment.table import PermutationSpec
from lmcflow.correlation import _Moments
from lmcflow.seeding import generator

__all__ = ["PROOF_RTOL", "SpecProofError", "prove_spec", "derive_axes", "derived_spec", "example_batch",
           "feature_extractor", "node_feature_moments"]


def example_batch(in_shape, n: int = 4) -> torch.Tensor:
    """A fixed batch of ``n`` standard-normal inputs of shape ``in_shape`` (the proof and the trace use it)."""
    return torch.randn((n, *in_shape), generator=generator("spec-proof-batch", 0))


def derive_axes(model: nn.Module, x: torch.Tensor, overrides: dict | None = None) -> GraphAxes:
    """Trace ``model`` on ``x`` (eval mode, a batch of at least 2) and join its axes (module doc)."""
    overrides = dict(overrides or {})
    bad = {k: v for k, v in overrides.items() if v not in OVERRIDES}
    if bad:
        raise ValueError(f"model.trace_overrides {bad}: each value must be one of {', '.join(OVERRIDES)}")
    if x.shape[0] < 2:
        raise ValueError("derive_axes needs a batch of at least 2 inputs, so that broadcasting is unambiguous")
    was_training = model.training
    model.eval()
    try:
        gm = trace(model, overrides)
        try:
            ShapeProp(gm).propagate(x)
        except Exception as err:  # the model's own error on this input (any type)
            cause = err.__cause__ or err
            raise ValueError(f"{type(model).__name__} does not run on a batch of shape {tuple(x.shape)}: "
                             f"{type(cause).__name__}: {str(cause).splitlines()[0]}. Give an input the model "
                             f"takes (example_input, or model.example_input_shape)") from err
    finally:
        model.train(was_training)
    rules = _Rules(gm, model.state_dict(keep_vars=False), overrides)
    rules.root = type(model).__name__
    used = set()
    for node in gm.graph.nodes:
        if node.op == "call_module":
            used.add(node.target)
        apply_rule(rules, node)
    for keys in shared_tensors(model).values():  # one tensor under several names: one permutation of each axis
        for key in keys[1:]:
            for d, n in enumerate(rules.sd[key].shape):
                rules.uf.join(rules.uf.add(("p", keys[0], d), n), rules.uf.add(("p", key, d), n),
                              f"{key} (the same tensor as {keys[0]})")
    unknown = sorted(set(overrides) - used - {n.name for n in gm.graph.nodes})
    if unknown:
        raise ValueError(f"model.trace_overrides names {unknown}, which are neither modules called in the traced "
                         f"graph nor node names")
    if rules.unsupported:
        raise UnsupportedGraph(
            f"cannot derive the permutation spec of {type(model).__name__}: {len(rules.unsupported)} node(s) do "
            f"ops lmcflow's graph rules do not know:\n" + "\n".join(rules.unsupported) +
            "\nDeclare each module in model.trace_overrides: {'<module path>': 'fixed'} keeps it whole (its inputs "
            "and outputs keep their order, its parameters are not permuted) or 'elementwise' (it acts entry by "
            "entry on a tensor and returns one of the same shape, like an activation).")
    return GraphAxes(rules.uf, gm.graph, rules.kinds, [n.name for n in gm.graph.nodes], rules.attention,
                     resolve_splits(rules.uf, rules.splits))


def shared_tensors(model: nn.Module) -> dict:
    """{first name: [every state_dict name of that tensor]} for tensors registered under several names."""
    names: dict = {}
    for key, t in model.state_dict(keep_vars=True).items():
        names.setdefault(id(t), []).append(key)
    return {keys[0]: keys for keys in names.values() if len(keys) > 1}


def _group_names(ga: GraphAxes, sd: dict, roots: set) -> dict:
    names, taken = {}, set()
    for key, t in sd.items():  # the layer whose output a group is: its weight's axis 0
        for d in range(t.dim()):
            el = ("p", key, d)
            if el not in ga.classes.parent:
                continue
            root = ga.classes.find(el)
            if root in roots and root not in names and (d == 0 or key.endswith("bias")):
                base = key.rpartition(".")[0] or key
                name = base if base not in taken else f"{base}[{key}:{d}]"
                names[root] = name
                taken.add(name)
    for key, t in sd.items():
        for d in range(t.dim()):
            el = ("p", key, d)
            if el in ga.classes.parent and ga.classes.find(el) in roots and ga.classes.find(el) not in names:
                names[ga.classes.find(el)] = f"{key}:{d}"
    return names


def _feature_nodes(ga: GraphAxes, root) -> tuple:
    """(node, axis) of each activation output in the group; residual sums if none; else the layers' outputs."""
    found = {"activation": [], "residual": [], "producer": []}
    for name in ga.order:
        kind = ga.kinds.get(name)
        if kind not in found:
            continue
        for d in range(8):
            el = ("n", name, d)
            if el not in ga.classes.parent:
                break
            if ga.classes.find(el) == root:
                found[kind].append((name, d))
                break
    return tuple(found["activation"] or found["residual"] or found["producer"])


def _head_classes(ga: GraphAxes) -> dict:
    """{root: (name, role, attention record)} of every attention whose head classes stay free (roles "qk", "vo",
    "packed"); where one is fixed, all its classes are fixed with it (nothing of a head may move alone)."""
    uf, out = ga.classes, {}
    for rec in ga.attention:
        els = {"qk": rec["qk"], "vo": rec["vo"], "packed": rec["packed"]}
        why = next((uf.fixed[uf.find(el)] for el in els.values() if el is not None and uf.is_fixed(el)), None)
        if why is not None:
            for el in els.values():
                if el is not None:
                    uf.fix(el, why)
            continue
        for role, el in els.items():
            if el is not None:
                name = f"{rec['path']}.{'in_proj' if role == 'packed' else role}"
                out[uf.find(el)] = (name, role, rec)
    return out


def _head_tables(heads: dict, sizes: dict) -> tuple[dict, dict]:
    """(spec.heads, spec.stacks) of the attention classes ``heads`` (``_head_classes``) that are groups."""
    by_path: dict = {}
    for name, role, rec in heads.values():
        by_path.setdefault(rec["path"], {})[role] = name
    spec_heads, stacks = {}, {}
    for path, roles in by_path.items():
        rec = next(r for n, _, r in heads.values() if r["path"] == path)
        for role in ("qk", "vo"):
            spec_heads[roles[role]] = (path, rec["heads"])
        if "packed" in roles and roles["packed"] in sizes:
            e = sizes[roles["qk"]]
            stacks[roles["packed"]] = ((roles["qk"], e), (roles["qk"], e), (roles["vo"], e))
    return spec_heads, stacks


def derived_spec(model: nn.Module, x: torch.Tensor, overrides: dict | None = None, arch: str | None = None,
                 prove: bool = True) -> PermutationSpec:
    """``PermutationSpec`` of ``model`` from its graph traced on ``x``; proven by ``prove_spec`` unless
    ``prove=False``."""
    ga = derive_axes(model, x, overrides)
    sd = model.state_dict()
    uf = ga.classes
    heads = _head_classes(ga)
    candidates = set()
    for key, t in sd.items():
        for d in range(t.dim()):
            el = ("p", key, d)
            if el in uf.parent and not uf.is_fixed(el) and t.shape[d] > 1:
                candidates.add(uf.find(el))
    names = _group_names(ga, sd, candidates - set(heads))
    names.update({root: name for root, (name, _, _) in heads.items()})
    axes, fixed, sizes = {}, {}, {}
    for key, t in sd.items():
        ax = []
        for d in range(t.dim()):
            el = ("p", key, d)
            root = uf.find(el) if el in uf.parent else None
            ax.append(names.get(root))
            if root is not None and root in uf.fixed and t.shape[d] > 1 and \
                    not uf.fixed[root].endswith("kernel positions"):
                fixed[f"{key}:{d}"] = uf.fixed[root]
        axes[key] = tuple(ax)
    for key, ax in axes.items():
        for d, g in enumerate(ax):
            if g is not None:
                sizes.setdefault(g, int(sd[key].shape[d]))
    for root, (name, _, _) in heads.items():
        sizes.setdefault(name, uf.size[root])  # packed q/k/v: the head classes hold no tensor axis of their own
    order = {n: i for i, n in enumerate(names.values())}
    sizes = dict(sorted(sizes.items(), key=lambda kv: order[kv[0]]))
    trainable = {k for k, _ in model.named_parameters(remove_duplicate=False)}
    aliases = {k: keys for keys in shared_tensors(model).values() for k in keys}
    for key, ax in axes.items():
        named = [g for g in ax if g is not None]
        if key in trainable and len(named) != len(set(named)):
            shared = f" ({key} is one tensor shared by {aliases[key]}: each name's layer ties its axes)" \
                if key in aliases else ""
            module = key.rpartition(".")[0]
            raise UnsupportedGraph(
                f"{key}: the graph ties two of its axes {ax} to one permutation{shared}; weight matching needs "
                f"distinct groups. Override: {{'{module}': 'fixed'}} in model.trace_overrides")
    by_name = {v: k for k, v in names.items()}
    spec_heads, stacks = _head_tables(heads, sizes)
    for _, n_heads, wholes in ga.split_heads:  # head splits written with reshape (graph_axes.resolve_splits)
        groups = [names[r] for r in wholes if names.get(r) in sizes]
        spec_heads.update({g: (f"{groups[0]}:heads", n_heads) for g in groups})
    spec = PermutationSpec(
        arch=arch or type(model).__name__, axes=axes, sizes=sizes, feature_indices={},
        parameters=tuple(k for k, _ in model.named_parameters() if k in axes),
        feature_nodes={g: _feature_nodes(ga, by_name[g]) for g in sizes}, fixed=fixed,
        trace_overrides=dict(overrides or {}), heads=spec_heads, stacks=stacks)
    if not spec.sizes:
        reasons = sorted(set(spec.fixed.values()))
        raise UnsupportedGraph(
            f"the permutation spec of {spec.arch} has no group: every hidden axis is kept in order, so there is "
            f"nothing to align. Reasons ({len(reasons)}):\n" + "\n".join(f"  {w}" for w in reasons[:20]) +
            "\nAn override that keeps a module 'fixed' keeps its axes in order; declare entrywise modules "
            "'elementwise' instead")
    if prove:
        spec.proof_residual = prove_spec(model, spec, x)
    return spec


def feature_extractor(model: nn.Module, spec: PermutationSpec) -> tuple[fx.GraphModule, list]:
    """A GraphModule sharing ``model``'s parameters that returns the outputs of every feature node of ``spec``."""
    gm = trace(model, spec.trace_overrides)
    nodes = {n.name: n for n in gm.graph.nodes}
    wanted = sorted({name for feats in spec.feature_nodes.values() for name, _ in feats}, key=list(nodes).index)
    missing = [n for n in wanted if n not in nodes]
    if missing:
        raise ValueError(f"feature nodes {missing} are not in the traced graph of {type(model).__name__}; the spec "
                         f"was derived from another architecture")
    out = next(n for n in gm.graph.nodes if n.op == "output")
    gm.graph.erase_node(out)
    gm.graph.output(tuple(nodes[n] for n in wanted))
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm, wanted


@torch.no_grad()
def node_feature_moments(model_a: nn.Module, model_b: nn.Module, spec: PermutationSpec, x: torch.Tensor,
                         batch_size: int = 500) -> dict:
    """{group: [moments of A's and B's features at each of its feature nodes]} over ``x`` (each position of a
    feature map or token sequence counts as a sample)."""
    ga_, wanted = feature_extractor(model_a.eval(), spec)
    gb_, _ = feature_extractor(model_b.eval(), spec)
    pos = {n: i for i, n in enumerate(wanted)}
    moments = {g: [_Moments() for _ in feats] for g, feats in spec.feature_nodes.items()}
    for i in range(0, len(x), batch_size):
        fa, fb = ga_(x[i:i + batch_size]), gb_(x[i:i + batch_size])
        for g, feats in spec.feature_nodes.items():
            for m, (name, axis) in zip(moments[g], feats):
                a, b = fa[pos[name]], fb[pos[name]]
                m.add(a.movedim(axis, -1).reshape(-1, a.shape[axis]).float(),
                      b.movedim(axis, -1).reshape(-1, b.shape[axis]).float())
    return moments
