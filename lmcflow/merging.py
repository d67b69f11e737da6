"""Linear interpolation between two trained models, evaluated along λ."""
from __future__ import annotations

import logging
import time

import torch
from torch import nn

from lmcflow.metrics import cross_entropy_at, fit_inverse_temperature
from lmcflow.training import metrics_from_outputs, predict, reset_bn_stats

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
    return out


def evaluate_path(model: nn.Module, sd_a: dict, sd_b: dict, data, lambdas, train_eval_size=None,
                  bn_reset_size=None, reset_bn: bool = True) -> list[dict]:
    """Loss/accuracy of θλ on train and test, raw and temperature-calibrated.

    For every λ one inverse temperature β is fitted on the validation split; the
    calibrated loss on each split uses that β. BatchNorm statistics of θλ are
    re-estimated on training data at every λ (reset_bn=True; including the
    endpoints, so every point of the curve is treated alike).
    """
    task = data.task
    x_train, y_train = data.x["train"], data.y["train"]
    if train_eval_size:
        x_train, y_train = x_train[:train_eval_size], y_train[:train_eval_size]
    x_bn = data.x["train"][:bn_reset_size] if bn_reset_size else data.x["train"]
    splits = {"train": (x_train, y_train), "test": (data.x["test"], data.y["test"])}
    rows = []
    for i, lam in enumerate(lambdas):
        t0 = time.perf_counter()
        model.load_state_dict(interpolate_state(sd_a, sd_b, lam))
        if reset_bn:
            reset_bn_stats(model, x_bn)
        beta = float("nan")
        if task == "classification" and len(data.y["val"]) > 0:
            beta = fit_inverse_temperature(predict(model, data.x["val"]), data.y["val"])
        for split, (xs, ys) in splits.items():
            out = predict(model, xs)
            m = metrics_from_outputs(out, ys, task)
            cal = cross_entropy_at(out, ys, beta) if task == "classification" and beta == beta else float("nan")
            rows.append({"lam": float(lam), "split": split, "loss": m["loss"], "acc": m["acc"],
                         "error": 1.0 - m["acc"] if task == "classification" else float("nan"),
                         "calibrated_loss": cal, "beta": beta})
        test = rows[-1]
        log.info(f"[merge] λ {i + 1}/{len(lambdas)} = {lam:.2f}: test loss={test['loss']:.4f} "
            f"err={test['error']:.4f} cal_loss={test['calibrated_loss']:.4f} β={beta:.3f} "
            f"({time.perf_counter() - t0:.1f}s)")
    return rows
