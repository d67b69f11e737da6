"""The torchvision sweep of the derived permutation spec, shared by tests/test_spec_sweep.py and
benchmarks/bench_spec_sweep.py: every classification builder of torchvision.models at random init, num_classes 10,
a batch of 2 at the smallest input the builder takes; derived and proven, or refused with lmcflow's message."""
from __future__ import annotations

import re
import time
from pathlib import Path

import torch
import torchvision

from lmcflow.alignment.coverage import coverage
from lmcflow.alignment.derive import derived_spec, example_batch
from lmcflow.alignment.graph_axes import UnsupportedGraph

DOC = Path(__file__).resolve().parents[1] / "docs" / "spec-sweep.md"
# the smallest input each family takes (default 32×32) and the keyword that lets a ViT take it
SMALL = {"alexnet": (63, {}), "inception_v3": (75, {"aux_logits": False, "init_weights": True}),
         "googlenet": (32, {"aux_logits": False, "init_weights": True}),
         "maxvit_t": (224, {}),
         "vit_h_14": (28, {"image_size": 28})}


def builders() -> list[str]:
    return torchvision.models.list_models(module=torchvision.models)


def build(name: str):
    size, kw = SMALL.get(name, (32, {"image_size": 32} if name.startswith("vit_") else {}))
    torch.manual_seed(0)
    return torchvision.models.get_model(name, weights=None, num_classes=10, **kw), (3, size, size)


def sweep_one(name: str) -> dict:
    """{name, status: derived | refused, coverage, residual, groups, seconds, message}; any other exception
    propagates (a crash is a bug)."""
    model, shape = build(name)
    n_params = sum(p.numel() for p in model.parameters())
    t0 = time.perf_counter()
    try:
        spec = derived_spec(model.eval(), example_batch(shape, 2))
    except UnsupportedGraph as err:
        return {"name": name, "status": "refused", "coverage": None, "residual": None, "groups": 0,
                "seconds": time.perf_counter() - t0, "message": str(err), "params": n_params, "input": shape}
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    return {"name": name, "status": "derived", "coverage": coverage(spec, shapes), "residual": spec.proof_residual,
            "groups": len(spec.groups), "seconds": time.perf_counter() - t0, "message": "", "params": n_params,
            "input": shape}


def _why(msg: str) -> str:
    """A refusal in a few words: the ops of its nodes, or its first sentence."""
    ops = sorted({m.group(1).rpartition(".")[2] for m in re.finditer(r"call_\w+ (\S+?)[;,\s]", msg)})
    first = msg.splitlines()[0]
    tied = re.match(r"(\S+): the graph ties two of its axes", first)
    if tied:
        return f"one group on two axes of `{tied.group(1)}` (a projection of the stream onto itself)"
    if ops:
        return f"{sum(': module ' in line for line in msg.splitlines())} node(s): " + ", ".join(ops[:4])
    return first.split(";")[0][:110]


HEAVY_PARAMS = 12e6  # builders above this (torchvision's recorded count) run under the slow marker


def heavy(name: str) -> bool:
    """Over HEAVY_PARAMS parameters by torchvision's recorded count (1000 classes; nothing is built)."""
    return torchvision.models.get_model_weights(name).DEFAULT.meta["num_params"] > HEAVY_PARAMS


def table(rows: list[dict]) -> str:
    """Markdown table, one row per builder of ``builders()``; a builder without a row reads "not run"."""
    by_name = {r["name"]: r for r in rows}
    lines = ["| model | CI | result | groups | coverage | proof residual (fp64) | seconds |",
             "|---|---|---|---|---|---|---|"]
    for name in builders():
        ci = "slow" if heavy(name) else "default"
        r = by_name.get(name)
        if r is None:
            lines.append(f"| `{name}` | {ci} | not run | - | - | - | - |")
            continue
        cov = f"{100 * r['coverage']:.1f}%" if r["coverage"] is not None else "-"
        res = f"{r['residual']:.1e}" if r["residual"] is not None else "-"
        what = f"refused: {_why(r['message'])}" if r["status"] == "refused" else r["status"]
        lines.append(f"| `{name}` | {ci} | {what} | {r['groups']} | {cov} | {res} | {r['seconds']:.1f} |")
    return "\n".join(lines)
