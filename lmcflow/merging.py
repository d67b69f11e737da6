"""Linear interpolation between two trained models, evaluated along λ."""
from __future__ import annotations

import copy
import logging
import math
import time

import torch
from torch import nn
from torch.func import functional_call, vmap

from lmcflow.evaluation import metrics_from_outputs, predict, reset_bn_stats
from lmcflow.metrics import cross_entropy_at, fit_inverse_temperature
from lmcflow.state import like_state

log = logging.getLogger(__name__)


def interpolate_state(sd_a: dict, sd_b: dict, lam: float) -> dict:
    """θλ = (1−λ)θ_a + λθ_b for float tensors; integer buffers (BN counters) come from A."""
    if sd_a.keys() != sd_b.keys():
        raise ValueError("the two models have different parameter names; they cannot be interpolated")
    out = {}
    for k, a in sd_a.items():
        b = sd_b[k]
        if a.shape != b.shape:
            raise ValueError(f"parameter {k}: shapes {tuple(a.shape)} and {tuple(b.shape)} differ")
        if a.is_floating_point():
            # Exact at the endpoints: λ=0 returns θ_a and λ=1 returns θ_b bit for bit.
            out[k] = a.clone() if lam == 0 else b.clone() if lam == 1 else torch.lerp(a, b, lam)
        else:
            out[k] = a.clone()
    return like_state(out, sd_a)


def path_inputs(data, train_eval_size=None, bn_reset_size=None) -> tuple[dict, dict, torch.Tensor]:
    """What ``evaluate_path`` evaluates: ({split: (x, y)} scored, {split: x} predicted (val first where it
    calibrates the temperature), the BatchNorm re-estimation inputs)."""
    x_train, y_train = data.x["train"], data.y["train"]
    if train_eval_size:
        x_train, y_train = x_train[:train_eval_size], y_train[:train_eval_size]
    x_bn = data.x["train"][:bn_reset_size] if bn_reset_size else data.x["train"]
    splits = {"train": (x_train, y_train), "test": (data.x["test"], data.y["test"])}
    if data.task == "classification" and len(data.y["val"]) > 0:
        splits_out = {"val": data.x["val"], **{s: xs for s, (xs, _) in splits.items()}}
    else:
        splits_out = {s: xs for s, (xs, _) in splits.items()}
    return splits, splits_out, x_bn


@torch.no_grad()
def endpoint_outputs(model: nn.Module, data, train_eval_size=None, bn_reset_size=None,
                     reset_bn: bool = True) -> dict:
    """{split: fp32 outputs} of one model on what ``evaluate_path`` predicts, BatchNorm statistics re-estimated
    as at every point of a path: the λ = 0 or λ = 1 outputs of every path that ends at this model. A job
    computes them once per model and passes them to ``evaluate_path(endpoints=...)`` for every pair and method
    (a model of n seeds ends 2(n−1) pair paths per method; B permuted onto A is the same function as B)."""
    _, splits_out, x_bn = path_inputs(data, train_eval_size, bn_reset_size)
    model = copy.deepcopy(model)
    if reset_bn and any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        reset_bn_stats(model, x_bn)
    return {split: predict(model, xs) for split, xs in splits_out.items()}


def evaluate_path(model: nn.Module, sd_a: dict, sd_b: dict, data, lambdas, train_eval_size=None,
                  bn_reset_size=None, reset_bn: bool = True, batched: bool | None = None,
                  max_stack_bytes: int | None = None, endpoints: dict | None = None, repair=None) -> list[dict]:
    """Loss/accuracy of θλ on train and test, raw and temperature-calibrated, and the mean logit norm.

    For every λ one inverse temperature β is fitted on the validation split; the
    calibrated loss on each split uses that β. BatchNorm statistics of θλ are
    re-estimated on training data at every λ (reset_bn=True; including the
    endpoints, so every point of the curve is treated alike). ``logit_norm`` is the mean over the split's
    examples of the L2 norm of θλ's output (``logit_norm``), from the same outputs as the loss.

    ``endpoints``: {0.0: A's, 1.0: B's ``endpoint_outputs``} (either may be missing): those λ are not
    evaluated again. They equal the path's own evaluation at λ = 0 and 1 (θλ is A or B bit for bit there) up
    to fp32 rounding of the stacked products.

    ``repair``: fn(λ, state of θλ) -> the state evaluated instead (REPAIR, ``lmcflow.repair``; it replaces the
    BatchNorm reset, which it includes): the path is then evaluated λ by λ.

    ``batched=True`` evaluates the λ-interpolated models stacked, several λ per forward pass
    (``torch.func.vmap`` over the stacked weights; BatchNorm statistics re-estimated per λ exactly as
    ``reset_bn_stats`` does), in chunks of as many λ as fit ``max_stack_bytes`` (default: 1 GiB on
    the CPU, a quarter of the free memory on a GPU; see ``lambda_chunk``). It equals the per-λ loop
    (``batched=False``) up to fp32 rounding of batched products (tests/test_merging.py states the
    measured size). A chunk of one λ runs the loop. ``batched=None`` (default) picks what was
    measured faster: stacked for models without convolutions (MLP ×1/16 on CPU: ~2-7x, see
    benchmarks/bench_bundle.py), the loop for conv nets (vmap runs their convolutions as grouped
    convolutions, 1.2-1.9x slower than the loop on CPU; not yet measured on a GPU).
    """
    task = data.task
    splits, splits_out, x_bn = path_inputs(data, train_eval_size, bn_reset_size)
    lambdas = [float(lam) for lam in lambdas]
    given = {float(lam): out for lam, out in (endpoints or {}).items()}
    todo = [lam for lam in lambdas if lam not in given]
    if repair is not None:
        batched = False
    elif batched is None:
        batched = not any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())
    x_example = data.x["train"][:1]  # one input, for shapes (the train split is never empty)
    chunk = lambda_chunk(model, x_example, len(todo), max_stack_bytes) if batched else 1
    outputs, seconds = dict(given), dict.fromkeys(given, 0.0)
    for start in range(0, len(todo), chunk):
        lams = todo[start:start + chunk]
        t0 = time.perf_counter()
        if len(lams) == 1:
            state = interpolate_state(sd_a, sd_b, lams[0])
            model.load_state_dict(state if repair is None else repair(lams[0], state))
            if reset_bn and repair is None:
                reset_bn_stats(model, x_bn)
            chunk_out = [{split: predict(model, xs) for split, xs in splits_out.items()}]
        else:
            chunk_out = _stacked_outputs(model, sd_a, sd_b, lams, splits_out, x_bn if reset_bn else None, x_example,
                                         stacked_batch_size(model, x_example, len(lams), max_stack_bytes))
        for lam, out in zip(lams, chunk_out, strict=True):
            outputs[lam], seconds[lam] = out, (time.perf_counter() - t0) / len(lams)
    rows = []
    for i, lam in enumerate(lambdas):
        t1 = time.perf_counter()
        out_by_split = outputs[lam]
        beta = float("nan")
        if "val" in out_by_split:
            beta = fit_inverse_temperature(out_by_split["val"], data.y["val"])
        for split, (_, ys) in splits.items():
            out = out_by_split[split]
            m = metrics_from_outputs(out, ys, task)
            cal = cross_entropy_at(out, ys, beta) if not math.isnan(beta) else float("nan")
            rows.append({"lam": lam, "split": split, "loss": m["loss"], "acc": m["acc"],
                         "error": 1.0 - m["acc"] if task == "classification" else float("nan"),
                         "calibrated_loss": cal, "beta": beta, "logit_norm": logit_norm(out)})
        test = rows[-1]
        how = "given" if lam in given else f"{chunk} λ stacked" if batched and chunk > 1 and len(todo) > 1 else ""
        log.info(f"[merge] λ {i + 1}/{len(lambdas)} = {lam:.2f}: test loss={test['loss']:.4f} "
            f"err={test['error']:.4f} cal_loss={test['calibrated_loss']:.4f} β={beta:.3f} "
            f"({seconds[lam] + time.perf_counter() - t1:.1f}s{f', {how}' if how else ''})")
    return rows


@torch.no_grad()
def check_same_function(model: nn.Module, sd_b: dict, sd_b_aligned: dict, x: torch.Tensor, what: str,
                        rtol: float = 1e-4) -> None:
    """B permuted onto A must be the same function as B (every path reuses B's endpoint outputs): outputs on
    ``x`` agree to ``rtol`` of their scale, else the permutation spec misses a tensor."""
    net = copy.deepcopy(model)
    net.load_state_dict(sd_b)
    ref = predict(net, x)
    net.load_state_dict(sd_b_aligned)
    diff = float((predict(net, x) - ref).abs().max()) if len(x) else 0.0
    if diff > rtol * max(1.0, float(ref.abs().max())):
        raise RuntimeError(f"{what}: the permutation changed model B's function (outputs differ by {diff:.3g}); "
                           f"the permutation spec misses a tensor")


def logit_norm(out: torch.Tensor) -> float:
    """Mean over examples of ‖z(x)‖₂ of a model's outputs (N, C), in float64."""
    return float(out.double().norm(dim=1).mean()) if len(out) else float("nan")


def lambda_chunk(model: nn.Module, x_example: torch.Tensor, n_lambdas: int, max_stack_bytes: int | None = None,
                 batch_size: int = 4096) -> int:
    """How many λ-interpolated models to stack per forward pass.

    Per λ the stack holds the model's tensors plus, while evaluating a batch of ``batch_size``
    inputs, about three times the largest layer output (input, output and a batched-layout copy;
    measured with forward hooks on one example). The chunk is the number of λ whose sum stays
    under ``max_stack_bytes``: default 1 GiB on the CPU, a quarter of the free memory on a GPU.
    """
    if n_lambdas <= 1:
        return 1
    budget = _stack_budget(x_example, max_stack_bytes)
    return max(1, min(n_lambdas, int(budget // max(1, bytes_per_lambda(model, x_example, batch_size)))))


def stacked_batch_size(model: nn.Module, x_example: torch.Tensor, chunk: int, max_stack_bytes: int | None = None,
                       smallest: int = 4096, largest: int = 16384) -> int:
    """Inputs per stacked forward pass: as many as the budget holds for ``chunk`` λ, within
    [smallest, largest] (larger batches make the small batched products of narrow models cheaper;
    results do not depend on it beyond rounding)."""
    state, per_example = _footprint(model, x_example)
    free = _stack_budget(x_example, max_stack_bytes) - chunk * state
    return int(min(largest, max(smallest, free // max(1, chunk * per_example))))


def bytes_per_lambda(model: nn.Module, x_example: torch.Tensor, batch_size: int = 4096) -> int:
    """Memory estimate of one stacked λ model (see ``lambda_chunk``)."""
    state, per_example = _footprint(model, x_example)
    return state + per_example * batch_size


def _stack_budget(x_example: torch.Tensor, max_stack_bytes: int | None) -> int:
    if max_stack_bytes is not None:
        return max_stack_bytes
    if x_example.device.type == "cuda":
        return torch.cuda.mem_get_info(x_example.device)[0] // 4
    return 1 << 30


def _footprint(model: nn.Module, x_example: torch.Tensor) -> tuple[int, int]:
    """(bytes of the model's tensors, bytes per input example: 3x the largest layer output in fp32)."""
    state_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    largest = [0]

    def hook(_module, _inputs, output):
        if isinstance(output, torch.Tensor):
            largest[0] = max(largest[0], output[0].numel())

    handles = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(x_example)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    return state_bytes, 3 * largest[0] * 4


def first_affine_layer(model: nn.Module, sd_a: dict, sd_b: dict, x_example: torch.Tensor):
    """(name, per-example input shape) of the layer that first sees the raw input, if the path's
    outputs of that layer can be interpolated instead of recomputed; else None.

    That holds when the layer is a linear or convolution layer (W_eff = mask⊙W + offset included)
    applied to the input itself (reshaped at most) and its buffers (masks, offsets) are the same in
    A and B: its output is then affine in its weights, so y(θλ) = (1−λ)·y(θ_A) + λ·y(θ_B), and two
    evaluations serve every λ. Found with hooks on one random input.
    """
    calls = []

    def pre_hook(module, args):
        if not calls:
            calls.append((module, args[0]))

    names = {m: n for n, m in model.named_modules()}
    handles = [m.register_forward_pre_hook(pre_hook) for m in model.modules() if not list(m.children())]
    was_training = model.training
    probe = torch.randn(x_example.shape, generator=torch.Generator().manual_seed(0)).to(x_example.device)
    try:
        model.eval()
        with torch.no_grad():
            model(probe)
    finally:
        for h in handles:
            h.remove()
        model.train(was_training)
    if not calls:
        return None
    module, inp = calls[0]
    if not isinstance(module, (nn.Linear, nn.Conv2d)) or inp.numel() != probe.numel() or \
            not torch.equal(inp.reshape(-1), probe.reshape(-1)):
        return None
    name = names[module]
    prefix = f"{name}." if name else ""
    params = {n for n, _ in module.named_parameters()}
    for key, value in sd_a.items():
        if key.startswith(prefix) and key[len(prefix):] not in params and not torch.equal(value, sd_b[key]):
            return None
    return name, tuple(inp.shape[1:])


class _GivenOutput(nn.Module):
    """Stands in for a layer whose output was computed outside the stacked forward pass."""

    value = None

    def forward(self, _x):
        return self.value


@torch.no_grad()
def _stacked_outputs(model: nn.Module, sd_a: dict, sd_b: dict, lams: list[float], inputs: dict, x_bn,
                     x_example: torch.Tensor, batch_size: int = 4096, bn_batch_size: int = 1000) -> list[dict]:
    """fp32 outputs of every θλ on every ``inputs[split]``: [{split: (N, C)}] per λ.

    The λ-interpolated models are stacked and evaluated with one vmapped forward pass per batch.
    The first layer, when ``first_affine_layer`` allows it, is evaluated for A and B only and its
    outputs interpolated (on the CPU it is most of an MLP's work). With ``x_bn`` the BatchNorm
    statistics of each θλ are first re-estimated as ``reset_bn_stats`` does: zeroed, then one pass
    over ``x_bn`` in batches of ``bn_batch_size`` in train mode with the cumulative average.
    (momentum=None computes the factor 1/num_batches_tracked from a tensor, which vmap cannot read;
    the same factor 1/(b+1) is set as momentum before batch b instead.)
    """
    states = [interpolate_state(sd_a, sd_b, lam) for lam in lams]
    base = copy.deepcopy(model).to("meta")
    first = first_affine_layer(model, sd_a, sd_b, x_example)
    given = None
    if first is not None:
        name, in_shape = first
        prefix = f"{name}."
        layer = copy.deepcopy(model.get_submodule(name)).to("meta")
        # A's and B's layer side by side: every tensor of a linear / conv layer has the output units first,
        # so one product with twice the outputs evaluates both (cheaper than two on the CPU).
        both = {k[len(prefix):]: torch.cat([v, sd_b[k]]) for k, v in sd_a.items() if k.startswith(prefix)}
        states = [{k: v for k, v in sd.items() if not k.startswith(prefix)} for sd in states]
        parent, _, attr = name.rpartition(".")
        given = _GivenOutput()
        setattr(base.get_submodule(parent) if parent else base, attr, given)
        weights = torch.tensor(lams, device=x_example.device)

        def first_outputs(x):
            y_a, y_b = functional_call(layer, both, (x.reshape(len(x), *in_shape),)).chunk(2, dim=1)
            w = weights.to(y_a.dtype).view(-1, *([1] * y_a.dim()))
            return torch.lerp(y_a.unsqueeze(0), y_b.unsqueeze(0), w)  # exact at λ = 0 and λ = 1

    stacked = {k: torch.stack([sd[k] for sd in states]) for k in states[0]}

    def call(sd, x, y_first):
        given.value = y_first
        try:
            return functional_call(base, sd, (x,))
        finally:
            given.value = None

    def forward(x):
        if given is None:
            return vmap(lambda sd, xs: functional_call(base, sd, (xs,)), in_dims=(0, None))(stacked, x)
        return vmap(call, in_dims=(0, None, 0))(stacked, x, first_outputs(x))

    bns = [(name, m) for name, m in base.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if x_bn is not None and bns:
        for name, _ in bns:
            p = f"{name}." if name else ""
            stacked[p + "running_mean"].zero_()
            stacked[p + "running_var"].fill_(1)
            stacked[p + "num_batches_tracked"].zero_()
        base.eval()
        for _, m in bns:  # only the statistics in train mode, as reset_bn_stats: dropout stays off
            m.train()
        for b, i in enumerate(range(0, len(x_bn), bn_batch_size)):
            for _, m in bns:
                m.momentum = 1.0 / (b + 1)
            forward(x_bn[i:i + bn_batch_size])
    base.eval()
    out = [{} for _ in lams]
    for split, x in inputs.items():
        logits = torch.cat([forward(x[i:i + batch_size]).float() for i in range(0, len(x), batch_size)], dim=1)
        for o, z in zip(out, logits, strict=True):
            o[split] = z
    return out
