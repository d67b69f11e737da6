"""How long each job runs and how much memory it holds, computed from its work: the cost model behind every
job's ``runtime`` and ``mem_mb`` request and ``lmcflow plan`` (docs/cluster.md, "Requests from a cost model").

Work is counted without data or torch: the forward FLOPs of one example of a model (``forward_flops``, exact
matmul/conv counts, checked against torch's FlopCounterMode in tests/test_cost.py), its parameters, the
dataset's split sizes from the config, and each rule's loops (epochs × steps, λ points × evaluated inputs,
weight-matching sweeps, ...). Seconds = start-up + Σ work / device rate; a request = seconds × ``cluster.safety``
+ ``cluster.job_overhead_s`` (the SLURM job's own snakemake start-up), in whole minutes.
"""
from __future__ import annotations

import math
from pathlib import Path

from lmcflow.config import (
    alignment_params,
    analysis_params,
    many_sizes,
    mechanism_lambdas,
    mechanism_params,
    merge_methods,
    repairs,
    repairs_method,
)
from lmcflow.config.catalog import COHERENCE_DEFAULTS, GAUSSIAN_SUBSPACE_DEFAULTS, TORCHVISION_DATASETS
from lmcflow.config.partners import REAL

# One CPU thread, fp32: benchmarks/bench_cost_rates.py on this project's 2-core machine
# (benchmarks/results/cpu/cost_rates.json; tests/test_cost.py checks the two agree).
CPU_RATES = {
    "train_gflops": 72.67,  # training arithmetic (forward + backward + update)
    "loop_step_overhead_s": 0.000805,  # per step of lmcflow's loop beyond its arithmetic ...
    "loop_step_overhead_per_model_s": 0.000577,  # ... plus this per further model of a stacked bundle
    "eval_gflops": 120.46,  # eval-mode forward passes (λ paths, analyses)
    "lap_s_per_n_power": 1.021e-08,  # linear_sum_assignment of n × n: c × n^p seconds
    "lap_power": 2.177,
    "startup_cpu_s": 2.271,  # interpreter + torch + lmcflow imports
}
# One GPU: half the H200 rates of benchmarks/results/h200/gpu_throughput.json at the widest measured widths
# (training, fp32: MLP ×16 20, VGG-11 ×16 14.8, ResNet-20 ×16 38 TFLOP/s; bf16: MLP ×16 26, VGG-11 ×16 199,
# ResNet-20 ×32 385), a conservative default until lmcflow's own jobs are timed on it: fp32 for training at
# train.precision fp32, bf16 for training at auto or bf16; evaluations (metrics are fp32, forward passes at
# batch 4,096) at the full measured fp32 training rate. Step
# overheads: the single-model steps measured at small width (MLP 3.2-4.1 ms, VGG-11 7-8, ResNet-20 12) rounded
# up; the per-model overhead of a stacked bundle is not measured on a GPU (one batched step: small). LAPs run on
# the CPU either way; start-up adds CUDA initialisation.
GPU_RATES = {
    "train_gflops": {"mlp": 10_000.0, "sum_relu": 10_000.0, "vgg11": 7_400.0, "resnet20": 19_000.0},
    "train_gflops_bf16": {"mlp": 13_000.0, "sum_relu": 13_000.0, "vgg11": 99_000.0, "resnet20": 190_000.0},
    "eval_gflops": {"mlp": 20_000.0, "sum_relu": 20_000.0, "vgg11": 14_800.0, "resnet20": 38_000.0},
    "loop_step_overhead_s": {"mlp": 0.004, "sum_relu": 0.004, "vgg11": 0.009, "resnet20": 0.014},
    "loop_step_overhead_per_model_s": 0.0002,
    "lap_s_per_n_power": CPU_RATES["lap_s_per_n_power"],
    "lap_power": CPU_RATES["lap_power"],
    "startup_cpu_s": 30.0,
}
# what several CPU threads of one job are worth, per further thread (they do not scale perfectly)
THREAD_EFFICIENCY = 0.7
# MergeMany's rounds of weight matchings (each model to the average of the others) until no permutation changes
MANY_ROUNDS = 4
# weight matching's assignment step is PyPI lapjv (float32, warm-started from the previous sweep's duals), not
# scipy: its time is the scipy fit above × this ratio, lapjv-warm ÷ scipy on the real cost matrices of a weight
# matching at n = 2,048, the widest measured (benchmarks/bench_assignment_solvers.py, one thread, the solvers
# alternating in one run: benchmarks/results/cpu/assignment_solvers.json; 0.35 at n = 512, where the step is a
# small part of the job; tests/test_cost.py checks the two agree). Activation matching and the identifiability
# analysis still solve with scipy.
WM_LAP_OVER_SCIPY = 0.279
# weight matching converges in 2-13 sweeps in lmcflow's benchmarks; charged at this many (at most max_iter)
WM_SWEEPS = 15
BASE_MEM_MB = {"cpu": 600, "gpu": 3000}  # a python process with torch (and a CUDA context) before any data
MIN_MEM_MB = 1000
TORCHVISION_SPLITS = {"mnist": (60_000, 10_000), "fashion_mnist": (60_000, 10_000), "cifar10": (50_000, 10_000),
                      "cifar100": (50_000, 10_000)}
VGG11_CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")  # as lmcflow.models


def scaled(channels: int, width: float) -> int:
    return max(1, int(round(channels * width)))  # as lmcflow.models.scaled


# ----------------------------------------------------------------------- data and models, without torch
def dataset_shape(name: str, data_cfg: dict) -> dict:
    """{in_shape, num_classes, n_train, n_val, n_test} of a config's dataset, from the config alone."""
    syn = (data_cfg.get("synthetic") or {}).get(name)
    if syn is not None:
        gaussian = syn.get("generator") == "gaussian_subspace"
        p = {**(GAUSSIAN_SUBSPACE_DEFAULTS if gaussian else COHERENCE_DEFAULTS), **syn}
        return {"in_shape": (int(p["d"]),), "num_classes": int(p["classes"]) if gaussian else 1,
                "n_train": int(p["n_train"]), "n_val": int(p["n_val"]), "n_test": int(p["n_test"])}
    custom = (data_cfg.get("custom") or {}).get(name)
    if custom is not None:
        return custom_shape(custom, int(data_cfg.get("val_size") or 0))
    sub = (data_cfg.get("subsets") or {}).get(name) or {}
    base = sub.get("base", name)
    tv = TORCHVISION_DATASETS[base]
    full, test = TORCHVISION_SPLITS[base]
    val = int(data_cfg.get("val_size") or 0)
    n_train = full - val if sub.get("n_train") is None else min(int(sub["n_train"]), full - val)
    return {"in_shape": tuple(tv.in_shape), "num_classes": tv.num_classes, "n_train": n_train, "n_val": val,
            "n_test": test}


def custom_shape(custom: dict, val: int) -> dict:
    """``dataset_shape`` of ``data.custom`` data before it is prepared: an image folder's file counts (at
    ``image_size``, 32x32 where absent), else CIFAR-10's shape and sizes (a factory's data is unknown until it
    runs)."""
    folder = custom.get("image_folder")
    if folder is None:
        return {"in_shape": (3, 32, 32), "num_classes": 10, "n_train": 50_000 - val, "n_val": val, "n_test": 10_000}
    root = Path(folder)
    n = {s: sum(1 for f in (root / s).rglob("*") if f.is_file()) for s in ("train", "val", "test")}
    classes = sum(1 for d in (root / "train").iterdir() if d.is_dir()) if (root / "train").is_dir() else 10
    n_val = n["val"] or val
    h, w = custom.get("image_size") or (32, 32)
    return {"in_shape": (int(custom.get("channels", 3)), int(h), int(w)), "num_classes": max(classes, 1),
            "n_train": max(n["train"] - (0 if n["val"] else val), 1), "n_val": n_val, "n_test": n["test"]}


def model_counts(model: dict, in_shape: tuple, num_classes: int) -> dict:
    """{flops: forward FLOPs of one example (2 × multiply-adds of linear and conv layers), params, units:
    activations of one example (sum over layers), groups: sizes of the permutable hidden groups}."""
    arch, width = model["arch"], float(model["width"])
    if arch in ("mlp", "sum_relu"):
        d, h = math.prod(in_shape), scaled(int(model["base_width"]), width)
        dims = [d] + [h] * (int(model["depth"]) if arch == "mlp" else 1)
        macs = sum(a * b for a, b in zip(dims, dims[1:])) + (h * num_classes if arch == "mlp" else 0)
        n_layers = len(dims) - 1
        head_bias = num_classes if arch == "mlp" else 0
        return {"flops": 2.0 * macs, "params": macs + h * n_layers + head_bias, "units": h * n_layers,
                "groups": [h] * n_layers}
    c, hw = in_shape[0], in_shape[1] * in_shape[2]
    normed = model.get("norm", "none") != "none"
    bias = bool(model.get("bias", True)) and not normed

    def conv(c_in, c_out, k):  # weights, bias or norm parameters of one conv layer
        return k * k * c_in * c_out + (c_out if bias else 0) + (2 * c_out if normed else 0)

    macs = params = units = 0
    groups = []
    if arch == "vgg11":
        for item in VGG11_CFG:
            if item == "M":
                hw //= 4
                continue
            out = scaled(item, width)
            macs, params, units = macs + hw * 9 * c * out, params + conv(c, out, 3), units + hw * out
            groups.append(out)
            c = out
    else:  # resnet20: stem, 3 stages of 3 basic blocks, 1x1 shortcuts where the shape changes
        widths = [scaled(w, width) for w in (16, 32, 64)]
        macs, params, units, c = hw * 9 * c * widths[0], conv(c, widths[0], 3), hw * widths[0], widths[0]
        for s, w in enumerate(widths):
            for b in range(3):
                stride = 2 if s > 0 and b == 0 else 1
                hw_out = hw // (stride * stride)
                short = stride != 1 or c != w
                macs += hw_out * 9 * (c * w + w * w) + (hw_out * c * w if short else 0)
                params += conv(c, w, 3) + conv(w, w, 3) + (conv(c, w, 1) if short else 0)
                units += 2 * hw_out * w
                c, hw = w, hw_out
            groups += [w] * 4  # the stream of the stage and its three block interiors
    head_bias = num_classes if model.get("bias", True) else 0
    return {"flops": 2.0 * (macs + c * num_classes), "params": params + c * num_classes + head_bias, "units": units,
            "groups": groups}


def point_counts(point, data_cfg: dict) -> dict:
    """``model_counts`` of a point's model plus its dataset's ``dataset_shape``."""
    ds = dataset_shape(point.dataset, data_cfg)
    return {**ds, **model_counts(point.model, ds["in_shape"], ds["num_classes"])}


# ----------------------------------------------------------------------- rates
def device_rates(resources: dict, threads: int, precision: str = "fp32", arch: str = "mlp") -> tuple[str, dict]:
    """('gpu' | 'cpu', rates with one value per key) of a job on ``arch`` asking for ``resources`` with
    ``threads`` CPU threads; on a GPU, training at ``precision`` auto or bf16 runs at the bf16 rate (on a CPU
    at the fp32 rate)."""
    if int(resources.get("gpu") or 0) > 0:
        train = GPU_RATES["train_gflops_bf16" if precision in ("auto", "bf16") else "train_gflops"][arch]
        return "gpu", {**GPU_RATES, "train_gflops": train, "eval_gflops": GPU_RATES["eval_gflops"][arch],
                       "loop_step_overhead_s": GPU_RATES["loop_step_overhead_s"][arch]}
    speed = 1.0 + THREAD_EFFICIENCY * (max(1, int(threads)) - 1)
    return "cpu", {**CPU_RATES, "train_gflops": CPU_RATES["train_gflops"] * speed,
                   "eval_gflops": CPU_RATES["eval_gflops"] * speed}


def lap_seconds(n: int, rates: dict) -> float:
    return rates["lap_s_per_n_power"] * n ** rates["lap_power"]


def eval_seconds(c: dict, examples: float, rates: dict) -> float:
    return c["flops"] * examples / (rates["eval_gflops"] * 1e9)


def merge_eval_examples(point, c: dict) -> int:
    """Inputs a λ point is evaluated on: the train-split subset, validation and test."""
    tes = point.merge["train_eval_size"]
    return min(c["n_train"], tes if tes is not None else c["n_train"]) + c["n_val"] + c["n_test"]


# ----------------------------------------------------------------------- work of each rule's job (seconds)
def train_seconds(stacks: list, n_models: int, data_cfg: dict, rates: dict) -> float:
    """A train job: its stacked bundles (lists of points) one after another, ``n_models`` seeds each."""
    total = 0.0
    for points in stacks:
        c = [point_counts(p, data_cfg) for p in points]
        steps = max(int(p.train["epochs"]) * math.ceil(ci["n_train"] / int(p.train["batch_size"]))
                    for p, ci in zip(points, c))
        k = n_models * len(points)
        per_step = rates["loop_step_overhead_s"] + rates["loop_step_overhead_per_model_s"] * (k - 1)
        total += steps * per_step
        for p, ci in zip(points, c):
            arith = 3 * ci["flops"] * int(p.train["epochs"]) * ci["n_train"] / (rates["train_gflops"] * 1e9)
            final_eval = eval_seconds(ci, ci["n_train"] + ci["n_val"] + ci["n_test"], rates)
            total += n_models * (arith + final_eval)
    return total


def interpolate_seconds(points: list, n_pairs: int, data_cfg: dict, rates: dict) -> float:
    """The λ path of every pair and merge method of the trained points and null partners of a group (BatchNorm:
    plus a statistics pass per λ)."""
    total = 0.0
    for p in points:
        # an untrained real point has no λ path; an untrained null partner does (real A, untrained B)
        if int(p.train["epochs"]) <= 0 and p.partner == REAL:
            continue
        c = point_counts(p, data_cfg)
        examples = merge_eval_examples(p, c)
        if p.model.get("norm") == "batchnorm":
            examples += p.merge["bn_reset_size"] or c["n_train"]
        plain = int(p.merge["lambdas"]) * (eval_seconds(c, examples, rates) + 0.02)
        repaired = 0.0
        if repairs(p):  # endpoint statistics once, then per λ: the merged model's statistics and a second path
            stats = eval_seconds(c, min(c["n_train"], int(p.merge["repair"]["examples"])), rates)
            repaired = 2 * stats + int(p.merge["lambdas"]) * (stats + eval_seconds(c, examples, rates) + 0.02)
        total += n_pairs * sum(plain + (repaired if repairs_method(p, m) else 0.0) for m in merge_methods(p))
    return total


def merge_many_seconds(point, data_cfg: dict, rates: dict) -> float:
    """Every N-subset of the point's seeds (``merge.many.sizes``) for every method: its alignment (MergeMany
    charged at MANY_ROUNDS rounds of N weight matchings; activation matching N − 1 pairs), the merged model's
    evaluation (REPAIR'd a second time with ``merge.repair``), beside each seed's endpoint evaluated once."""
    c = point_counts(point, data_cfg)
    examples = merge_eval_examples(point, c)
    evaluate = eval_seconds(c, examples, rates) + 0.02
    if repairs(point):
        stats = eval_seconds(c, min(c["n_train"], int(point.merge["repair"]["examples"])), rates)
    total = len(point.seeds) * evaluate
    for n in many_sizes(point):
        subsets = math.comb(len(point.seeds), n)
        for method in point.merge["many"]["methods"]:
            align = {"identity": 0.0, "weight_matching": MANY_ROUNDS * n, "activation_matching": n - 1}[method]
            per = align * (align_seconds(point, method, 1, data_cfg, rates) if align else 0.0) + evaluate
            if repairs_method(point, method):
                per += (n + 1) * stats + evaluate
            total += subsets * per
    return total


def align_seconds(point, method: str, n_pairs: int, data_cfg: dict, rates: dict) -> float:
    c = point_counts(point, data_cfg)
    al = alignment_params(point)
    laps = sum(lap_seconds(n, rates) for n in c["groups"])
    if method == "weight_matching":
        sweeps = min(WM_SWEEPS, int(al["max_iter"]))
        per_pair = sweeps * (WM_LAP_OVER_SCIPY * laps + 4 * c["params"] / (rates["eval_gflops"] * 1e9))
    elif method == "activation_matching":
        samples = min(c["n_train"], al["samples"] or c["n_train"])
        corr = sum(2.0 * samples * n * n for n in c["groups"]) / (rates["eval_gflops"] * 1e9)
        per_pair = 2 * eval_seconds(c, samples, rates) + corr + laps
    else:  # random_permutation
        per_pair = 0.0
    return n_pairs * (per_pair + 0.05)


def mechanism_seconds(point, n_pairs: int, data_cfg: dict, rates: dict) -> float:
    """LEWC & co. per pair: forward passes of A, B, the merged and the perturbed model per λ, and the ranks
    (SVDs of samples × units features, at a quarter of the eval rate)."""
    c = point_counts(point, data_cfg)
    mech = mechanism_params(point)
    samples, lambdas = min(c["n_test"], mech["samples"] or c["n_test"]), len(mechanism_lambdas(point))
    svd = sum(8.0 * samples * n * n for n in c["groups"]) / (rates["eval_gflops"] * 1e9 / 4)
    return n_pairs * (lambdas * (6 * eval_seconds(c, samples, rates) + svd) + 0.2)


def identifiability_seconds(points: list, n_pairs: int, data_cfg: dict, rates: dict) -> float:
    """Matching objective (every feature point × similarity, with ``n_random`` random permutations) and the
    unaligned / aligned λ paths of every pair of the group's points with analysis.identifiability."""
    total = 0.0
    for p in points:
        a = analysis_params(p)
        if not a["identifiability"]:
            continue
        c = point_counts(p, data_cfg)
        samples = min(c["n_train"], int(a["n_samples"]))
        modes = len(a["matching_features"]) * len(a["matching_similarities"])
        per_mode = sum(2.0 * samples * n * n / (rates["eval_gflops"] * 1e9) + lap_seconds(n, rates)
                       + int(a["n_random"]) * n * 1e-6 for n in c["groups"])
        paths = 2 * int(p.merge["lambdas"]) * eval_seconds(c, merge_eval_examples(p, c), rates)
        total += n_pairs * (modes * (per_mode + 2 * eval_seconds(c, samples, rates)) + paths + 0.1)
    return total


def swap_seconds(points: list, n_models: int, data_cfg: dict, rates: dict) -> float:
    """Realization and swap costs of every model: features on ``n_samples`` inputs, PCA and ridge fits per layer."""
    total = 0.0
    for p in points:
        a = analysis_params(p)
        if not a["swap_costs"]:
            continue
        c = point_counts(p, data_cfg)
        samples = min(c["n_train"], int(a["n_samples"]))
        d = math.prod(c["in_shape"])
        per_layer = sum(2.0 * samples * (d * d + n * d) * (1 + int(a["ridge_steps"])) for n in c["groups"])
        total += n_models * (eval_seconds(c, samples, rates) + per_layer / (rates["eval_gflops"] * 1e9) + 0.2)
    return total


# ----------------------------------------------------------------------- memory (MB)
def train_mem_mb(stacks: list, n_models: int, data_cfg: dict, device: str) -> float:
    """Host memory of a train job: the datasets (float32) and, per model, its weights, gradients and optimizer
    state (SGD momentum 1, AdamW 2 more copies) and one batch's activations, forward and backward. On a GPU those
    live in device memory; the host holds one model's weights and optimizer state while saving a state."""
    points = [p for s in stacks for p in s]
    data = sum(_data_bytes(p.dataset, data_cfg) for p in {p.dataset: p for p in points}.values())
    models = 0.0
    for p in points:
        c = point_counts(p, data_cfg)
        opt = 2 if p.train["optimizer"] == "adamw" else 1
        if device == "gpu":
            models = max(models, 4.0 * (1 + opt) * c["params"])
        else:
            models += n_models * 4.0 * ((2 + opt) * c["params"] + 3 * int(p.train["batch_size"]) * c["units"])
    return BASE_MEM_MB[device] + (data + models) / 2**20


def merge_mem_mb(points: list, data_cfg: dict, device: str) -> float:
    """Host memory of a merge-side job: the datasets and three models (A, B, merged), plus on a CPU the
    activations of an evaluation batch of 4,096 (on a GPU they live in device memory)."""
    data = sum(_data_bytes(p.dataset, data_cfg) for p in {p.dataset: p for p in points}.values())
    batch = 0 if device == "gpu" else 2 * 4096
    models = max(4.0 * (3 * c["params"] + batch * c["units"]) for c in (point_counts(p, data_cfg) for p in points))
    return BASE_MEM_MB[device] + (data + models) / 2**20


def _data_bytes(name: str, data_cfg: dict) -> float:
    ds = dataset_shape(name, data_cfg)
    return 4.0 * (ds["n_train"] + ds["n_val"] + ds["n_test"]) * (math.prod(ds["in_shape"]) + 1)


# ----------------------------------------------------------------------- requests
def request_minutes(seconds: float, cluster: dict) -> int:
    """The ``runtime`` a job asks for: its estimate × ``cluster.safety`` + ``cluster.job_overhead_s``, in whole
    minutes (at least 1)."""
    return max(1, math.ceil((seconds * float(cluster["safety"]) + float(cluster["job_overhead_s"])) / 60))


def request_mem_mb(mb: float, cluster: dict) -> int:
    return max(MIN_MEM_MB, int(math.ceil(mb * float(cluster["safety"]) / 100) * 100))
