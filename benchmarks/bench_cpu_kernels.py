"""What ``cpu_kernels: portable`` and ``vendor_neutral`` cost against ``native``, measured in one run.

MLP training steps as the default width study takes them (784→512→512→10, i.e. width 1 at base width
512, depth 2; SGD with momentum and weight decay, batch 128, fp32, one torch thread) and at width 8
(4096 hidden units). Each mode runs in its own Python process, because the kernel choice is made from
the environment before torch is imported (``lmcflow.kernels``); the modes alternate, their order
flipping each round, so that load on a shared machine falls on both alike. Times are CPU seconds
(user + sys) per step, one thread, so a busy neighbour disturbs them less than wall time.

Prints per-mode medians and the ratio per width; last line
``cpu_kernels_ratio_x1=R1 cpu_kernels_ratio_x8=R8 vendor_neutral_ratio_x1=V1 vendor_neutral_ratio_x8=V8``
(portable / native and vendor_neutral / native). Writes the numbers to ``--out`` as JSON.

    .venv/bin/python benchmarks/bench_cpu_kernels.py [--rounds 5] [--steps 20] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
WIDTHS = {"x1": 1.0, "x8": 8.0}
STEPS_X8_DIVISOR = 4  # a width-8 step costs ~60× a width-1 step: fewer of them keep a round short


def worker(mode: str, steps: int) -> dict:
    """In a fresh process: the kernels of ``mode`` (set before torch is imported), then timed steps."""
    from lmcflow import kernels

    kernels.apply(mode)
    import torch

    from lmcflow.models import ModelSpec, build_model

    kernels.set_threads(1)
    out = {"capability": kernels.dispatched(), "step_cpu_s": {}}
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(128, 784, generator=g), torch.randint(0, 10, (128,), generator=g)
    for name, width in WIDTHS.items():
        torch.manual_seed(0)
        model = build_model(ModelSpec("mlp", (784,), 10, width=width, depth=2, base_width=512))
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=3e-3)
        n = steps if name == "x1" else max(2, steps // STEPS_X8_DIVISOR)
        times = []
        for i in range(n + 2):  # two warm-up steps
            t0 = time.process_time()
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            if i >= 2:
                times.append(time.process_time() - t0)
        out["step_cpu_s"][name] = statistics.median(times)
    return out


def run_mode(mode: str, steps: int) -> dict:
    from lmcflow import kernels

    held = {k for env in kernels.HELD_ENV.values() for k in env}
    env = {k: v for k, v in os.environ.items() if k not in held and k != "NPY_DISABLE_CPU_FEATURES"}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, __file__, "--worker", mode, "--steps", str(steps)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/cpu/cpu_kernels.json"))
    ap.add_argument("--worker", choices=["portable", "native", "vendor_neutral"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.steps)))
        return
    from lmcflow import kernels

    samples: dict[str, dict[str, list[float]]] = {m: {w: [] for w in WIDTHS} for m in kernels.MODES}
    capability = {}
    for r in range(args.rounds):
        for mode in kernels.MODES if r % 2 == 0 else kernels.MODES[::-1]:
            res = run_mode(mode, args.steps)
            capability[mode] = res["capability"]
            for w, t in res["step_cpu_s"].items():
                samples[mode][w].append(t)
    medians = {m: {w: statistics.median(v) for w, v in by_w.items()} for m, by_w in samples.items()}
    ratios = {w: medians["portable"][w] / medians["native"][w] for w in WIDTHS}
    neutral = {w: medians["vendor_neutral"][w] / medians["native"][w] for w in WIDTHS}
    for w in WIDTHS:
        print(f"{w}: native ({capability['native']}) {medians['native'][w] * 1e3:.1f} ms/step, "
              f"portable ({capability['portable']}) {medians['portable'][w] * 1e3:.1f} ms/step "
              f"(ratio {ratios[w]:.2f}), "
              f"vendor_neutral ({capability['vendor_neutral']}) {medians['vendor_neutral'][w] * 1e3:.1f} ms/step "
              f"(ratio {neutral[w]:.2f})")
    record = {"cpu": kernels.cpu_info(), "build": kernels.torch_build(), "capability": capability,
              "rounds": args.rounds, "steps": args.steps, "samples_step_cpu_s": samples,
              "median_step_cpu_s": medians, "ratio_portable_over_native": ratios,
              "ratio_vendor_neutral_over_native": neutral}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(args.out).with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    tmp.replace(args.out)
    print(" ".join([*(f"cpu_kernels_ratio_{w}={ratios[w]:.2f}" for w in WIDTHS),
                    *(f"vendor_neutral_ratio_{w}={neutral[w]:.2f}" for w in WIDTHS)]))


if __name__ == "__main__":
    main()
