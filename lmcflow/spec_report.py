"""``lmcflow spec MODULE:FACTORY``: the permutation spec lmcflow derives for a user's model, before any run.

Prints the derived groups (name, size, members), coverage by layer (of each layer's hidden axes: those not fixed
as the model's input or output and not kernel positions, how many a group permutes, and why the others are
kept), the proof's residual (``lmcflow.alignment.derive.prove_spec``), and, where the model is refused, lmcflow's
refusal naming the nodes. The model is built as a run builds it (``lmcflow.external.build_external``: the factory
gets ``num_classes``, and ``in_shape`` where its signature has it, plus ``--kwargs``). Exit status 0: derived and
proven; 1: refused or the proof failed; 2: the factory or its arguments are wrong.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from lmcflow.alignment.derive import SpecProofError, derived_spec, example_batch, prove_spec
from lmcflow.alignment.graph_axes import UnsupportedGraph
from lmcflow.alignment.proof import PROOF_RTOL, PROOF_RTOL_FP64
from lmcflow.external import FACTORY_ARCH, build_external

EXPECTED_FIXED = ("the model's input", "the model's output")


def layer_coverage(spec, state: dict) -> list[dict]:
    """Per layer (module path), its hidden axes: permuted by a group, or kept in order (with the reason)."""
    rows: dict[str, dict] = {}
    for key, ax in spec.axes.items():
        layer = key.rpartition(".")[0] or key
        row = rows.setdefault(layer, {"layer": layer, "hidden": 0, "permuted": 0, "kept": {}})
        for d, group in enumerate(ax):
            if state[key].dim() <= d or state[key].shape[d] <= 1:
                continue
            why = spec.fixed.get(f"{key}:{d}")
            if group is None and (why is None or why in EXPECTED_FIXED):
                continue  # kernel positions, the model's input or output: never a hidden axis
            row["hidden"] += 1
            if group is not None:
                row["permuted"] += 1
            else:
                row["kept"][f"{key}:{d}"] = why
    return [r for r in rows.values() if r["hidden"]]


def spec_report(factory: str, in_shape: tuple, num_classes: int, kwargs: dict | None = None,
                overrides: dict | None = None) -> tuple[str, bool]:
    """(the report's text, whether the spec was derived and proven)."""
    model = build_external(FACTORY_ARCH, factory, kwargs, None, 1.0, tuple(in_shape), num_classes)
    x = example_batch(in_shape)
    head = f"{factory} ({type(model).__name__}, input {tuple(in_shape)}, {num_classes} classes)"
    try:
        spec = derived_spec(model, x, overrides, arch=factory, prove=False)
    except (UnsupportedGraph, ValueError) as err:
        return f"{head}\nrefused: {err}", False
    if not spec.groups:
        return (f"{head}\nrefused: the traced graph leaves no hidden axis to permute (0 groups); declare the "
                f"modules that fix them in model.trace_overrides, or the model has no permutation symmetry"), False
    lines = [head, f"groups ({len(spec.groups)}):"]
    for g, n in spec.sizes.items():
        members = ", ".join(f"{k}[{d}]" for k, d in spec.members[g])
        if g in spec.heads:
            members = f"[{spec.heads[g][1]} heads of {spec.heads[g][0]}] {members}".rstrip()
        elif g in spec.stacks:
            members = f"[stack of {', '.join(str(p) for p, _ in spec.stacks[g])}] {members}"
        lines.append(f"  {g:32s} {n:6d} units  {members}")
    rows = layer_coverage(spec, model.state_dict())
    hidden = sum(r["hidden"] for r in rows)
    permuted = sum(r["permuted"] for r in rows)
    lines.append(f"coverage by layer ({permuted}/{hidden} hidden axes permuted, "
                 f"{100 * permuted / max(hidden, 1):.1f}%):")
    for r in rows:
        kept = "; ".join(f"{k} kept: {why}" for k, why in r["kept"].items())
        lines.append(f"  {r['layer']:32s} {r['permuted']}/{r['hidden']}" + (f"  ({kept})" if kept else ""))
    try:
        residual = prove_spec(model, spec, x)
    except SpecProofError as err:
        lines.append(f"proof: FAILED: {err}")
        return "\n".join(lines), False
    lines.append(f"proof: a random permutation of every group changes the outputs by {residual:.2e} x their spread "
                 f"in float64 (allowed {PROOF_RTOL_FP64:g}; in float32 within {PROOF_RTOL:g} x max |output|)")
    lines.append("refused: nothing")
    return "\n".join(lines), True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="lmcflow spec", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("factory", metavar="MODULE:FACTORY", help="the function that builds the model, as "
                    "model.factory names it (imported as it is, else from the working directory)")
    ap.add_argument("--in-shape", required=True, metavar="C,H,W", help="one input's shape, e.g. 3,32,32 or 784")
    ap.add_argument("--num-classes", type=int, default=10, help="passed to the factory (default 10)")
    ap.add_argument("--kwargs", default="{}", metavar="JSON", help="further factory arguments (model.kwargs)")
    ap.add_argument("--override", action="append", default=[], metavar="PATH=fixed|elementwise",
                    help="model.trace_overrides entries, by module path or node name (repeatable)")
    args = ap.parse_args(argv)
    try:
        in_shape = tuple(int(v) for v in args.in_shape.split(","))
        kwargs = json.loads(args.kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError("--kwargs must be a JSON object")
        overrides = dict(o.split("=", 1) for o in args.override)
        torch.manual_seed(0)  # the model's random init: the same report every time
        text, ok = spec_report(args.factory, in_shape, args.num_classes, kwargs, overrides)
    except ValueError as err:
        print(f"lmcflow spec: {err}", file=sys.stderr)
        return 2
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
