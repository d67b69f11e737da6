"""Benchmark: lmcflow's weight matching against the field's implementations, same pair, same run, one thread.

The pair: two seeded random-init MLPs of the width study (784 → 512w → 512w → 10, lmcflow's ``mlp``, seeds 1
and 2 as in ``bench_weight_matching_mlp.py``), at each ``--widths`` (default ×1, the default run's widest, and
×8, the regime run's widest), saved once as fp32 npz in a temporary folder. Each repetition runs, in this order
(alternated ``--reps`` times; medians, so that a change of load hits all alike):

* lmcflow: ``lmcflow.alignment.weight_matching`` in this process (its defaults: float64 products, the lapjv
  assignment step; identity start; random group order from ``generator("weight_matching", seed)``; stops after a
  sweep without improvement, 100 sweeps at most), and each of ``--variants``: ``fp32`` (float32 products,
  ``dtype=torch.float32``), ``forward`` (``init="forward"``, ``merge.alignment.init: forward``), ``forward-fp32``
  (both), each named ``lmcflow-<variant>`` and scored like the others.
* samuela/git-re-basin: ``weight_matching.weight_matching`` of the checkout's ``src/`` given by
  ``--git-re-basin`` (JAX, fp32, eager; ``mlp_permutation_spec(2)`` on the pair as flax kernels; random group
  order from ``PRNGKey(seed)``; same stopping rule, max_iter 100), in a subprocess of ``--python-with-jax``.
  A one-sweep run on the same pair first compiles JAX's per-op kernels for these shapes (``warmup_s``, not timed).
  Its ``utils`` needs flax only for helpers it does not use here; without flax, ``rngmix`` is defined as in it.
* PyPI ``rebasin``: ``PermutationCoordinateDescent(model_a, model_b, x).calculate_permutations(100)`` (torch
  fp32; its own loop: random group order from torch's global RNG, seeded, stops after a sweep without progress),
  in a subprocess of ``--python-with-rebasin``; the model tracing of its constructor is ``setup_s``, not timed.
* STE-MM (e5-a/STE-MM, ICML 2025): ``search.weight_matching_uv.weight_matching_uv(ps).fit(a, b)`` of the checkout's
  ``srcs/`` given by ``--ste-mm`` (or ``$STE_MM_SRC``), with its C++ Jonker–Volgenant module ``lap_uv`` built into
  that folder as its ``lap_uv/run_cmake.sh`` does (torch fp32 products, float32 solver warm-started from the last
  sweep's duals; ``ps`` is its ``PermutationSpec`` of the pair's two hidden groups, written out; random group
  order from torch's global RNG, seeded; its stopping rule, max_iter 300), in a subprocess of
  ``--python-with-ste-mm`` (or ``$STE_MM_PYTHON``; a Python with torch, scipy, tqdm and torchviz).

Times are taken inside each process around the matching alone (no imports, loading or warm-up). Every process
runs one thread (``OMP/MKL_NUM_THREADS=1``, ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``, torch 1 thread).
Each implementation's permutations are scored by lmcflow's ``weight_matching_objective`` (float64, all weights and
biases): the objective J each reached, and whether its permutations equal lmcflow's. An implementation whose
path is not given is skipped and said so. Writes ``benchmarks/results/cpu/weight_matching_field.json``; the last
line printed is the summary, ``wm_vs_fastest_field_x<w>=<lmcflow median / fastest field median>`` per width (≤ 1:
lmcflow no slower), and ``wm_<variant>_vs_fastest_field_x<w>`` per variant.

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_weight_matching_field.py --git-re-basin CHECKOUT/src \
        --python-with-jax JAXVENV/bin/python --python-with-rebasin REBASINVENV/bin/python \
        --ste-mm STEMM/srcs --python-with-ste-mm STEMMVENV/bin/python [--widths 1 8] [--reps 3] [--variants forward]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
VARIANTS = {"fp32": {"dtype": "float32"}, "forward": {"init": "forward"},
            "forward-fp32": {"init": "forward", "dtype": "float32"}}  # lmcflow's weight_matching options
KEYS = ("layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias", "head.weight", "head.bias")


# ---- workers: run in the other implementations' interpreters, so they import neither lmcflow nor each other ----

def _worker_git_re_basin(pair: str, seed: int, src: str) -> dict:
    import types

    import numpy as np
    sys.path.insert(0, src)
    import jax
    import jax.numpy as jnp
    from jax import random
    try:
        import utils  # noqa: F401  (git-re-basin's; needs flax)
        note = "utils from the checkout"
    except ImportError:
        stub = types.ModuleType("utils")
        stub.rngmix = lambda rng, x: random.fold_in(rng, hash(x))  # the checkout's definition
        sys.modules["utils"] = stub
        note = "utils.rngmix defined as in the checkout (flax absent)"
    import weight_matching as wm
    z = np.load(pair)
    flax_names = {"Dense_0": "layers.0", "Dense_1": "layers.1", "Dense_2": "head"}

    def params(side):
        out = {}
        for d, t in flax_names.items():
            out[f"{d}/kernel"] = jnp.asarray(z[f"{side}/{t}.weight"].T)
            out[f"{d}/bias"] = jnp.asarray(z[f"{side}/{t}.bias"])
        return out

    pa, pb = params("a"), params("b")
    ps = wm.mlp_permutation_spec(num_hidden_layers=2)
    t0 = time.perf_counter()
    jax.block_until_ready(wm.weight_matching(random.PRNGKey(seed), ps, pa, pb, max_iter=1, silent=True))
    warm = time.perf_counter() - t0
    sweeps = []
    orig = wm.rngmix
    wm.rngmix = lambda rng, x: (sweeps.append(x), orig(rng, x))[1]  # called once per sweep: counts them
    t0 = time.perf_counter()
    perm = jax.block_until_ready(wm.weight_matching(random.PRNGKey(seed), ps, pa, pb, silent=True))
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "warmup_s": warm, "sweeps": len(sweeps), "note": note, "jax": jax.__version__,
            "perms": {"hidden0": np.asarray(perm["P_0"]).tolist(), "hidden1": np.asarray(perm["P_1"]).tolist()}}


def _rows_to_perm(permuted, original) -> list:
    """perm with permuted[i] == original[perm[i]] (rows matched by their bytes)."""
    index = {r.tobytes(): i for i, r in enumerate(original)}
    return [index[r.tobytes()] for r in permuted]


def _worker_rebasin(pair: str, seed: int) -> dict:
    import numpy as np
    import rebasin
    import torch
    from rebasin import PermutationCoordinateDescent
    from torch import nn
    torch.set_num_threads(1)
    z = np.load(pair)
    width = z["a/layers.0.weight"].shape[0]

    class MLP(nn.Module):  # lmcflow's mlp at depth 2, norms and gates the identity
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(784, width), nn.Linear(width, width)])
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            x = x.flatten(1)
            for layer in self.layers:
                x = torch.relu(layer(x))
            return self.head(x)

    models = {}
    for side in "ab":
        models[side] = MLP().eval()
        models[side].load_state_dict({k: torch.from_numpy(z[f"{side}/{k}"]) for k in KEYS})
    original = {k: v.detach().clone().numpy() for k, v in models["b"].state_dict().items()}
    t0 = time.perf_counter()
    pcd = PermutationCoordinateDescent(models["a"], models["b"], torch.randn(1, 1, 28, 28))
    setup = time.perf_counter() - t0
    count = []
    step = pcd._calculate_permutations_step
    pcd._calculate_permutations_step = lambda loop: (count.append(1), step(loop))[1]  # once per sweep
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    pcd.calculate_permutations(max_iterations=100)
    seconds = time.perf_counter() - t0
    pcd.apply_permutations()
    permuted = {k: v.detach().numpy() for k, v in models["b"].state_dict().items()}
    return {"seconds": seconds, "setup_s": setup, "sweeps": len(count),
            "groups": len(pcd.pinit.model_graph.permutation_to_info),
            "rebasin": getattr(rebasin, "__version__", None) or _dist_version("rebasin"), "torch": torch.__version__,
            "perms": {"hidden0": _rows_to_perm(permuted["layers.0.weight"], original["layers.0.weight"]),
                      "hidden1": _rows_to_perm(permuted["head.weight"].T, original["head.weight"].T)}}


def _worker_ste_mm(pair: str, seed: int, src: str) -> dict:
    import numpy as np
    import torch
    sys.path.insert(0, src)
    from search.weight_matching import permutation_spec_from_axes_to_perm
    from search.weight_matching_uv import weight_matching_uv
    torch.set_num_threads(1)
    z = np.load(pair)
    ps = permutation_spec_from_axes_to_perm({"layers.0.weight": ("P_0", None), "layers.0.bias": ("P_0",),
                                             "layers.1.weight": ("P_1", "P_0"), "layers.1.bias": ("P_1",),
                                             "head.weight": (None, "P_1")})  # head.bias: no permuted axis
    pa, pb = ({k: torch.from_numpy(z[f"{side}/{k}"]) for k in KEYS} for side in "ab")
    wm = weight_matching_uv(ps)
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    wm.fit(pa, pb)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "sweeps": len(wm.metrics["l2_dist"]), "torch": torch.__version__,
            "perms": {"hidden0": wm.perm["P_0"].long().tolist(), "hidden1": wm.perm["P_1"].long().tolist()}}


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return None


# ---- the driver: lmcflow in this process, the others in theirs ----

def _external(python: str, kind: str, pair: Path, seed: int, src: str | None) -> dict:
    cmd = [python, str(Path(__file__).resolve()), "--worker", kind, "--pair", str(pair), "--seed", str(seed)]
    if src:
        cmd += ["--src", src]
    env = {**os.environ, **ONE_THREAD}
    env.pop("PYTHONPATH", None)  # the other interpreter imports its own packages, not this checkout's
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"{kind} worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _git_rev(path: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", type=float, nargs="+", default=[1.0, 8.0])
    ap.add_argument("--reps", type=int, default=3, help="alternated runs of each implementation; medians")
    ap.add_argument("--seed", type=int, default=0, help="each implementation's group-order seed")
    ap.add_argument("--git-re-basin", default=None, help="samuela/git-re-basin checkout's src/ folder")
    ap.add_argument("--git-re-basin-rev", default=None, help="its commit, where src/ is not in a git work tree")
    ap.add_argument("--python-with-jax", default=None, help="a Python with jax, jaxlib, numpy and scipy")
    ap.add_argument("--python-with-rebasin", default=None, help="a Python with PyPI rebasin (and torch)")
    ap.add_argument("--ste-mm", default=os.environ.get("STE_MM_SRC"),
                    help="e5-a/STE-MM checkout's srcs/ folder with lap_uv built in it (default $STE_MM_SRC)")
    ap.add_argument("--ste-mm-rev", default=None, help="its commit, where srcs/ is not in a git work tree")
    ap.add_argument("--python-with-ste-mm", default=os.environ.get("STE_MM_PYTHON"),
                    help="a Python with torch, scipy, tqdm and torchviz (default $STE_MM_PYTHON)")
    ap.add_argument("--variants", nargs="*", default=[], choices=sorted(VARIANTS),
                    help="lmcflow's weight_matching with these options as well (module doc)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cpu" / "weight_matching_field.json"))
    ap.add_argument("--worker", choices=("git-re-basin", "rebasin", "ste-mm"), help=argparse.SUPPRESS)
    ap.add_argument("--pair", help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        res = (_worker_git_re_basin(args.pair, args.seed, args.src) if args.worker == "git-re-basin"
               else _worker_ste_mm(args.pair, args.seed, args.src) if args.worker == "ste-mm"
               else _worker_rebasin(args.pair, args.seed))
        print(json.dumps(res))
        return
    os.environ.update(ONE_THREAD)
    import numpy as np
    import torch

    from lmcflow.alignment import permutation_spec, weight_matching
    from lmcflow.alignment.methods import weight_matching_objective
    from lmcflow.kernels import keep_freed_memory, set_threads
    from lmcflow.models import ModelSpec, build_model

    keep_freed_memory()
    set_threads(1)
    field = {}
    if args.git_re_basin and args.python_with_jax:
        field["git-re-basin"] = (args.python_with_jax, args.git_re_basin)
    else:
        print("# samuela/git-re-basin: skipped (give --git-re-basin SRC and --python-with-jax PYTHON)")
    if args.python_with_rebasin:
        field["rebasin"] = (args.python_with_rebasin, None)
    else:
        print("# PyPI rebasin: skipped (give --python-with-rebasin PYTHON)")
    if args.ste_mm and args.python_with_ste_mm:
        field["ste-mm"] = (args.python_with_ste_mm, args.ste_mm)
    else:
        print("# STE-MM: skipped (give --ste-mm SRCS and --python-with-ste-mm PYTHON, or $STE_MM_SRC and "
              "$STE_MM_PYTHON)")
    load = os.getloadavg()
    print(f"# bench_weight_matching_field: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}, 1 thread per process, load before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
          flush=True)
    results = {"machine": {"cpus": os.cpu_count(), "load_before": load}, "seed": args.seed, "reps": args.reps,
               "git_re_basin_rev": args.git_re_basin_rev or (_git_rev(args.git_re_basin) if args.git_re_basin
                                                              else None),
               "ste_mm_rev": args.ste_mm_rev or (_git_rev(args.ste_mm) if args.ste_mm else None), "widths": {}}
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for width in args.widths:
            models = {}
            for side, s in (("a", 1), ("b", 2)):
                torch.manual_seed(s)
                models[side] = build_model(ModelSpec(arch="mlp", in_shape=(1, 28, 28), num_classes=10, width=width,
                                                     depth=2, base_width=512))
            sd = {side: m.state_dict() for side, m in models.items()}
            spec = permutation_spec(models["a"])
            pair = Path(tmp) / f"pair_x{width:g}.npz"
            np.savez(pair, **{f"{side}/{k}": sd[side][k].numpy() for side in "ab" for k in KEYS})
            ours = {"lmcflow": {}, **{f"lmcflow-{v}": {k: getattr(torch, x) if k == "dtype" else x
                                                         for k, x in VARIANTS[v].items()} for v in args.variants}}
            runs: dict = {**{name: [] for name in ours}, **{name: [] for name in field}}
            for rep in range(args.reps):
                for name, kw in ours.items():
                    t0 = time.perf_counter()
                    perms, info = weight_matching(spec, sd["a"], sd["b"], seed=args.seed, **kw)
                    runs[name].append({"seconds": time.perf_counter() - t0, "sweeps": info["iterations"],
                                       "perms": {g: p.tolist() for g, p in perms.items()}})
                for name, (python, src) in field.items():
                    runs[name].append(_external(python, name, pair, args.seed, src))
                print(f"x{width:g} rep {rep}: " + ", ".join(f"{n} {r[-1]['seconds']:.2f} s ({r[-1]['sweeps']} sweeps)"
                                                            for n, r in runs.items())
                      + f", load {os.getloadavg()[0]:.2f}", flush=True)
            ref = runs["lmcflow"][-1]["perms"]
            row = {"hidden_units": spec.sizes["hidden0"]}
            for name, rs in runs.items():
                last = rs[-1]
                perms = {g: torch.tensor(p) for g, p in last["perms"].items()}
                j = weight_matching_objective(spec, sd["a"], sd["b"], perms)
                row[name] = {"median_s": statistics.median(r["seconds"] for r in rs),
                             "seconds": [r["seconds"] for r in rs], "sweeps": [r["sweeps"] for r in rs],
                             "objective": j, "identical_to_lmcflow": last["perms"] == ref,
                             **({"identical_to_float64": last["perms"] == runs[name[:-5]][-1]["perms"]}
                                if name.endswith("-fp32") and name[:-5] in runs else {}),
                             **{k: v for k, v in last.items() if k not in ("seconds", "sweeps", "perms")}}
            j0 = weight_matching_objective(spec, sd["a"], sd["b"], {g: torch.arange(n) for g, n in spec.sizes.items()})
            row["objective_identity"] = j0
            for name in runs:
                r = row[name]
                print(f"x{width:g} {name}: median {r['median_s']:.2f} s, sweeps {r['sweeps']}, "
                      f"J = {r['objective']:.7g} "
                      f"(identity {j0:.7g}), permutations identical to lmcflow's: {r['identical_to_lmcflow']}"
                      + "".join(f", {k} {v:.2f} s" for k, v in r.items() if k in ("warmup_s", "setup_s"))
                      + (f", identical to its float64 run: {r['identical_to_float64']}" if "identical_to_float64" in r
                         else ""), flush=True)
            if field:
                fastest = min(field, key=lambda n: row[n]["median_s"])
                row["fastest_field"] = fastest
                for name in ours:
                    ratio = row[name]["median_s"] / row[fastest]["median_s"]
                    row[name]["over_fastest_field"] = ratio
                    row[name]["objective_minus_fastest_field"] = row[name]["objective"] - row[fastest]["objective"]
                    tag = name.replace("lmcflow", "wm", 1).replace("-", "_")
                    summary.append(f"{tag}_vs_fastest_field_x{width:g}={ratio:.3f}")
                row["lmcflow_over_fastest_field"] = row["lmcflow"]["over_fastest_field"]
            results["widths"][f"{width:g}"] = row
    results["machine"]["load_after"] = os.getloadavg()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    load = results["machine"]["load_after"]
    print(f"# load after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; wrote {out}")
    print(" ".join(summary) if summary else "no field implementation given: nothing to compare")


if __name__ == "__main__":
    main()
