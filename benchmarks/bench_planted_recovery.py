"""Benchmark: planted-permutation recovery by weight matching on derived permutation specs.

For each architecture, model A (random init, seed 0) is copied, every group of its derived spec is permuted by a
random permutation, and every floating tensor is perturbed by Gaussian noise of ``--noise`` × its own standard
deviation. Weight matching (``lmcflow.alignment.weight_matching``, 100 sweeps at most), from the identity (Git
Re-Basin's start) and from the forward start (``init="forward"``), aligns the copy back to A; a unit is recovered
when the matched unit is the one the plant moved there. Writes ``benchmarks/results/cpu/planted_recovery.json``
(``--only`` / ``--inits``: replaces the rows it measures, keeps the others) and, from all its rows, the table
between the ``planted-recovery`` markers of docs/usage.md; the last line printed is the summary (the smallest recovered
fraction over all architectures, per start).

Usage:
    PYTHONPATH=. .venv/bin/python benchmarks/bench_planted_recovery.py [--noise 0.01 0.1] [--only resnet18 …] \
        [--inits forward]
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import time
from pathlib import Path

import torch

from lmcflow.alignment import apply_permutation, permutation_spec, weight_matching
from lmcflow.alignment.derive import derived_spec, example_batch
from lmcflow.models import ModelSpec, build_model

ROOT = Path(__file__).resolve().parents[1]
TV = {"image_size": 32}
MODELS = {  # name -> (ModelSpec fields, input shape)
    "torchvision:resnet18": ({}, (3, 32, 32)),
    "torchvision:resnet50": ({}, (3, 32, 32)),
    "torchvision:mobilenet_v3_small": ({}, (3, 32, 32)),
    "torchvision:vgg11_bn": ({}, (3, 32, 32)),
    "torchvision:convnext_tiny": ({}, (3, 32, 32)),
    "torchvision:vit_b_16": ({"kwargs": TV}, (3, 32, 32)),
    "mlp": ({"depth": 3}, (1, 28, 28)),
    "vgg11": ({"norm": "batchnorm"}, (3, 32, 32)),
    "resnet20": ({"norm": "batchnorm"}, (3, 32, 32)),
    "factory (examples/user_model/net.py)": ({"factory": "examples.user_model.net:build"}, (1, 28, 28)),
}


def _model(name: str):
    fields, shape = MODELS[name]
    arch = "factory" if name.startswith("factory") else name
    torch.manual_seed(0)
    return build_model(ModelSpec(arch=arch, in_shape=shape, num_classes=10, **fields)).eval(), shape


def plant(model, spec, noise: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    perms = {grp: torch.randperm(n, generator=g) for grp, n in spec.sizes.items()}
    sd = apply_permutation(spec, model.state_dict(), perms)
    sd = {k: v + noise * v.std() * torch.randn(v.shape, generator=g) if v.is_floating_point() and v.numel() > 1
          else v for k, v in sd.items()}
    b = copy.deepcopy(model)
    b.load_state_dict(sd)
    return b, perms


INITS = ("identity", "forward")


def recovery(name: str, noises, inits=INITS) -> list[dict]:
    model, shape = _model(name)
    t0 = time.perf_counter()
    spec = derived_spec(model, example_batch(shape, 2), arch=name) if name in ("mlp", "vgg11", "resnet20") \
        else permutation_spec(model)
    derive_s = time.perf_counter() - t0
    rows = []
    for noise in noises:
        b, planted = plant(model, spec, noise, seed=1)
        for init in inits:
            t0 = time.perf_counter()
            found, info = weight_matching(spec, model.state_dict(), b.state_dict(), max_iter=100, init=init)
            seconds = time.perf_counter() - t0
            hits = sum(int((found[g] == torch.argsort(p)).sum()) for g, p in planted.items())
            units = sum(len(p) for p in planted.values())
            rows.append({"model": name, "noise": noise, "init": init, "groups": len(spec.groups), "units": units,
                         "recovered": hits / units, "sweeps": info["iterations"], "match_seconds": seconds,
                         "derive_and_prove_seconds": derive_s, "fixed_parameter_axes": len(spec.fixed)})
            print(f"{name:40s} noise {noise:<5g} start {init:8s} {len(spec.groups):3d} groups {units:6d} units: "
                  f"{hits / units:.4f} recovered ({info['iterations']} sweeps, {seconds:.1f}s)", flush=True)
    return rows


def table(rows: list[dict], noises) -> str:
    cols = [(n, i) for n in noises for i in INITS]
    head = "| model | groups | units | " + " | ".join(f"noise {n:g}, {i} start" for n, i in cols) + " |"
    lines = [head, "|" + "---|" * (3 + len(cols))]
    for name in [n for n in MODELS if any(r["model"] == n for r in rows)]:
        rs = {(r["noise"], r["init"]): r for r in rows if r["model"] == name}
        first = next(iter(rs.values()))
        lines.append(f"| `{name}` | {first['groups']} | {first['units']} | " +
                     " | ".join(f"{rs[c]['recovered']:.4f}" if c in rs else "—" for c in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--noise", type=float, nargs="+", default=[0.01, 0.1])
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--inits", nargs="+", choices=INITS, default=list(INITS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    names = [n for n in MODELS if not args.only or any(o in n for o in args.only)]
    rows = [r for n in names for r in recovery(n, args.noise, args.inits)]
    out = ROOT / "benchmarks" / "results" / "cpu" / "planted_recovery.json"
    if out.exists():  # the rows it did not measure, as they were measured
        key = {(r["model"], r["noise"], r["init"]) for r in rows}
        rows = [r for r in json.loads(out.read_text())
                if (r["model"], r["noise"], r.setdefault("init", "identity")) not in key] + rows
    out.write_text(json.dumps(rows, indent=1) + "\n")
    doc = ROOT / "docs" / "usage.md"
    block = f"<!-- planted-recovery:begin -->\n{table(rows, args.noise)}\n<!-- planted-recovery:end -->"
    doc.write_text(re.sub(r"<!-- planted-recovery:begin -->.*<!-- planted-recovery:end -->", block, doc.read_text(),
                          flags=re.S))
    worst = {i: min((r for r in rows if r["init"] == i), key=lambda r: r["recovered"]) for i in INITS
             if any(r["init"] == i for r in rows)}
    print("planted recovery: min " + "; ".join(
        f"{i} start {w['recovered']:.4f} ({w['model']}, noise {w['noise']:g})" for i, w in worst.items())
        + f" of units recovered over {len({r['model'] for r in rows})} architectures")


if __name__ == "__main__":
    main()
