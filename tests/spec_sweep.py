"""The torchvision sweep of the derived permutation spec, shared by tests/test_spec_sweep.py and
benchmarks/bench_spec_sweep.py: every classification builder of torchvision.models at random init, num_classes 10,
a batch of 2 at the smallest input the builder takes; derived and proven, or refused with lmcflow's message."""
from __future__ import annotations

import contextlib
import gc
import json
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


# Random init draws every parameter from torch's generator (twice: the layer's own init, then the builder's), some
# seconds for the largest builders. Built, they take their values from one fixed pool of random numbers instead, at
# the distribution's scale: a prime number of values, read on from where the previous tensor stopped, so no two rows
# of a weight (nor two tensors) hold the same values, and the proof permutes a model as generic as a random init.
POOL_SIZE = 16_777_259  # a prime just above 2**24


@contextlib.contextmanager
def pooled_init():
    """``Tensor.uniform_`` and ``Tensor.normal_`` (every ``torch.nn.init`` function draws through them) on float32
    tensors fill from the pool, starting at its beginning; anything else as torch does it."""
    gen = torch.Generator().manual_seed(0)
    pools = {"uniform": torch.rand(POOL_SIZE, generator=gen), "normal": torch.randn(POOL_SIZE, generator=gen)}
    at = [0]
    uniform, normal = torch.Tensor.uniform_, torch.Tensor.normal_

    def fill(t: torch.Tensor, pool: torch.Tensor, scale: float, shift: float) -> bool:
        if t.dtype != torch.float32 or t.device.type != "cpu" or not t.is_contiguous() or t.requires_grad and \
                torch.is_grad_enabled():
            return False
        flat, done = t.view(-1), 0
        while done < flat.numel():
            n = min(flat.numel() - done, POOL_SIZE - at[0])
            flat[done:done + n].copy_(pool[at[0]:at[0] + n])
            done, at[0] = done + n, (at[0] + n) % POOL_SIZE
        flat.mul_(scale).add_(shift)
        return True

    def pooled_uniform(self, a=0.0, b=1.0, *, generator=None):
        return self if fill(self, pools["uniform"], b - a, a) else uniform(self, a, b, generator=generator)

    def pooled_normal(self, mean=0.0, std=1.0, *, generator=None):
        return self if fill(self, pools["normal"], std, mean) else normal(self, mean, std, generator=generator)

    torch.Tensor.uniform_, torch.Tensor.normal_ = pooled_uniform, pooled_normal
    try:
        yield
    finally:
        torch.Tensor.uniform_, torch.Tensor.normal_ = uniform, normal


def build(name: str):
    size, kw = SMALL.get(name, (32, {"image_size": 32} if name.startswith("vit_") else {}))
    torch.manual_seed(0)
    with pooled_init():
        return torchvision.models.get_model(name, weights=None, num_classes=10, **kw), (3, size, size)


STRUCTURE = Path(__file__).resolve().parent / "data" / "spec_sweep_structure.json"


def structure_of(model: torch.nn.Module) -> list[str]:
    """What a builder is built of, without its depth and widths: each module's class (``module.qualname``), a
    convolution's also by how it groups its channels (grouped and depthwise convolutions keep channels in order,
    which the derivation sees); sorted, once each."""
    kinds = set()
    for m in model.modules():
        kind = f"{type(m).__module__}.{type(m).__qualname__}"
        if isinstance(m, torch.nn.modules.conv._ConvNd) and m.groups > 1:
            kind += " depthwise" if m.groups == m.in_channels == m.out_channels else " grouped"
        kinds.add(kind)
    return sorted(kinds)


def measured_structure(names: list[str]) -> dict[str, list[str]]:
    """``structure_of`` each builder, built as the sweep builds it (one at a time; about a minute for all)."""
    out = {}
    for name in names:
        model, _ = build(name)
        out[name] = structure_of(model)
        del model
        gc.collect()
    return out


def recorded_structure() -> dict[str, list[str]]:
    """``measured_structure`` of every builder as recorded in tests/data (``bench_spec_sweep.py --structure``)."""
    return json.loads(STRUCTURE.read_text())


def params(name: str) -> int:
    """torchvision's recorded parameter count (1000 classes; nothing is built)."""
    return torchvision.models.get_model_weights(name).DEFAULT.meta["num_params"]


def swept_in_ci(name: str) -> bool:
    """CI sweeps every builder up to HEAVY_PARAMS and, of the heavier ones, each that is the smallest builder of its
    recorded structure: a stratified sample, one per structure, since the larger builders of a structure repeat its
    blocks at other depths and widths and cost minutes together. The full sweep (docs/spec-sweep.md, recorded with
    ``bench_spec_sweep.py``; ``LMCFLOW_FULL_SPEC_SWEEP=1`` runs it as tests) covers the rest."""
    if not heavy(name):
        return True
    rec = recorded_structure()
    return min((n for n in rec if rec[n] == rec[name]), key=params) == name


def sweep_one(name: str) -> dict:
    """{name, status: derived | refused, coverage, residual, groups, seconds, cpu_seconds (this process's CPU time:
    the work itself, whatever else holds the machine), message, params, input, structure (``structure_of``)}; any
    other exception propagates (a crash is a bug). The model is freed before it returns (its traced graph holds it
    in a reference cycle, which only the garbage collector breaks): the sweep holds one model at a time."""
    try:
        return _sweep_one(name)
    finally:
        gc.collect()


def _sweep_one(name: str) -> dict:
    model, shape = build(name)
    kinds = structure_of(model)
    n_params = sum(p.numel() for p in model.parameters())
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        spec = derived_spec(model.eval(), example_batch(shape, 2))
    except UnsupportedGraph as err:
        return {"name": name, "status": "refused", "coverage": None, "residual": None, "groups": 0,
                "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "message": str(err),
                "params": n_params, "input": shape, "structure": kinds}
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    return {"name": name, "status": "derived", "coverage": coverage(spec, shapes), "residual": spec.proof_residual,
            "groups": len(spec.groups), "seconds": time.perf_counter() - t0,
            "cpu_seconds": time.process_time() - c0, "message": "", "params": n_params, "input": shape,
            "structure": kinds}


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


HEAVY_PARAMS = 12e6  # builders above this (torchvision's recorded count) are swept by test_spec_sweep_heavy.py


def heavy(name: str) -> bool:
    """Over HEAVY_PARAMS parameters by torchvision's recorded count (1000 classes; nothing is built)."""
    return params(name) > HEAVY_PARAMS


def table(rows: list[dict], cpu_seconds: bool = False) -> str:
    """Markdown table, one row per builder of ``builders()``; a builder without a row reads "not run".
    ``cpu_seconds``: the seconds column gives the process's CPU time, marked "CPU" (for a sweep run while another
    job held the machine at a higher priority, when wall time measures the wait)."""
    by_name = {r["name"]: r for r in rows}
    lines = ["| model | CI | result | groups | coverage | proof residual (fp64) | seconds |",
             "|---|---|---|---|---|---|---|"]
    for name in builders():
        ci = ("heavy" if swept_in_ci(name) else "full sweep") if heavy(name) else "default"
        r = by_name.get(name)
        if r is None:
            lines.append(f"| `{name}` | {ci} | not run | - | - | - | - |")
            continue
        cov = f"{100 * r['coverage']:.1f}%" if r["coverage"] is not None else "-"
        res = f"{r['residual']:.1e}" if r["residual"] is not None else "-"
        what = f"refused: {_why(r['message'])}" if r["status"] == "refused" else r["status"]
        sec = f"{r['cpu_seconds']:.1f} CPU" if cpu_seconds else f"{r['seconds']:.1f}"
        lines.append(f"| `{name}` | {ci} | {what} | {r['groups']} | {cov} | {res} | {sec} |")
    return "\n".join(lines)
