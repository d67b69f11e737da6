"""Peak resident memory of the spec proof (``prove_spec``) on one torchvision builder of the spec sweep: the
process's peak RSS after building the model and deriving its spec without the proof, then after the proof, and
the proof's seconds (one thread).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_proof_memory.py vit_b_16

The proof's own share is the second peak less the first (the model, the traced graph and the pool of random
values ``pooled_init`` reads stay resident for both).
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.spec_sweep

from lmcflow.alignment.derive import derived_spec, example_batch, prove_spec  # noqa: E402
from tests.spec_sweep import build  # noqa: E402


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model, shape = build(args.name)
    x = example_batch(shape, 2)
    spec = derived_spec(model.eval(), x, prove=False)
    before = peak_mib()
    t0 = time.perf_counter()
    residual = prove_spec(model, spec, x)
    seconds = time.perf_counter() - t0
    after = peak_mib()
    params = sum(p.numel() for p in model.parameters())
    print(f"{args.name}: {params / 1e6:.1f} M parameters ({params * 4 / 2**20:.0f} MiB float32); peak RSS "
          f"{before:.0f} MiB before the proof, {after:.0f} MiB after (the proof: +{after - before:.0f} MiB, "
          f"{(after - before) * 2**20 / params:.1f} bytes per parameter); residual {residual:.1e}; "
          f"{seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main()
