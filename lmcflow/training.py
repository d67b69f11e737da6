"""Training on in-memory tensors (evaluation: ``lmcflow.evaluation``; the resumable state file:
``lmcflow.train_state``).

Short, direct PyTorch in the style of airbench: the whole dataset lives on the
device, each epoch draws one permutation from a seeded generator, and the
learning rate is a pure function of the step, so a resumed run continues with
exactly the same sequence of batches and learning rates.
"""
from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from lmcflow import kernels
from lmcflow.evaluation import autocast, loss_fn, resolve_precision
from lmcflow.random_ops import SeededRandomness, check_random_ops, step_key
from lmcflow.seeding import generator
from lmcflow.train_state import load_state, save_state, usable_state

log = logging.getLogger(__name__)


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss. For a bundle, ``diverged`` describes every diverged member
    (name, epoch, step, global step, lr, loss) and ``results`` holds every member's training result."""

    def __init__(self, message: str, diverged: list | None = None, results: list | None = None):
        super().__init__(message)
        self.diverged = diverged or []
        self.results = results or []


def lr_at(step: int, total_steps: int, cfg: dict) -> float:
    """Learning rate at optimizer step ``step`` (0-based): linear warm-up then the schedule."""
    base = float(cfg["lr"])
    kind = cfg.get("schedule", "cosine")
    if kind == "geometric_warmup":  # ×lr_growth after each of the first warmup_epochs epochs, then constant
        epochs = min(step // cfg["_steps_per_epoch"], round(float(cfg.get("warmup_epochs", 0))))
        return base * float(cfg.get("lr_growth", 1.0)) ** epochs
    warm = round(float(cfg.get("warmup_epochs", 0)) * cfg["_steps_per_epoch"])
    if step < warm:
        return base * (step + 1) / warm
    t = (step - warm) / max(1, total_steps - warm)
    if kind == "constant":
        return base
    if kind == "cosine":
        return base * 0.5 * (1 + math.cos(math.pi * t))
    if kind == "linear":
        return base * (1 - t)
    if kind == "step":  # x0.1 at 50% and 75% of training
        return base * (0.1 ** ((t >= 0.5) + (t >= 0.75)))
    raise ValueError(f"train.schedule={kind!r} is unknown; allowed: constant, cosine, linear, step, geometric_warmup")


def make_optimizer(model: nn.Module, cfg: dict) -> torch.optim.Optimizer:
    return optimizer_for([p for p in model.parameters() if p.requires_grad], cfg)


def optimizer_for(params: list[torch.Tensor], cfg: dict, stacked: bool = False) -> torch.optim.Optimizer:
    """The ``train.optimizer`` over ``params`` (one model's, or a bundle's stacked parameters: SGD and
    AdamW act elementwise, so stacking changes no member's update).

    With ``train.weight_decay_on: weights`` biases and norm parameters (1-d per model; 2-d when
    ``stacked``, whose dim 0 is the member) form a second group without weight decay; the optimizer
    then holds the decayed parameters first, each group in the order of ``params``."""
    if cfg.get("weight_decay_on", "all") == "weights":
        per_model = [p.dim() - int(stacked) for p in params]
        groups = [{"params": [p for p, d in zip(params, per_model, strict=True) if d > 1]},
                  {"params": [p for p, d in zip(params, per_model, strict=True) if d <= 1], "weight_decay": 0.0}]
        params = [g for g in groups if g["params"]]
    kind = cfg.get("optimizer", "sgd")
    if kind == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg.get("momentum", 0.9),
                               nesterov=cfg.get("nesterov", False), weight_decay=cfg["weight_decay"])
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=cfg["lr"], betas=tuple(cfg.get("betas", (0.9, 0.999))),
                                 weight_decay=cfg["weight_decay"], fused=kernels.fused_adamw() or None)
    raise ValueError(f"train.optimizer={kind!r} is unknown; allowed: sgd, adamw")


def augment_crop_flip(x: torch.Tensor, g: torch.Generator, pad: int = 4) -> torch.Tensor:
    """Random crop with zero padding and random horizontal flip (standard CIFAR augmentation)."""
    return apply_crop_flip(x, *crop_flip_draws(len(x), g, pad), pad=pad)


def crop_flip_draws(n: int, g: torch.Generator, pad: int = 4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The random draws of ``augment_crop_flip`` for ``n`` images, in the order it makes them."""
    flip = torch.rand(n, generator=g) < 0.5
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=g)
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=g)
    return flip, dx, dy


def apply_crop_flip(x: torch.Tensor, flip: torch.Tensor, dx: torch.Tensor, dy: torch.Tensor,
                    pad: int = 4) -> torch.Tensor:
    """Crop each image of ``x`` (N, C, H, W) at offset (dy, dx) of its zero-padded copy, then flip it."""
    n, _, h, w = x.shape
    xp = F.pad(x, (pad, pad, pad, pad))
    rows = (dy.to(x.device)[:, None] + torch.arange(h, device=x.device)[None])  # (n, h)
    cols = (dx.to(x.device)[:, None] + torch.arange(w, device=x.device)[None])  # (n, w)
    out = xp[torch.arange(n, device=x.device)[:, None, None, None],
             torch.arange(x.shape[1], device=x.device)[None, :, None, None],
             rows[:, None, :, None], cols[:, None, None, :]]
    return torch.where(flip.to(x.device)[:, None, None, None], out.flip(3), out)


def late_loss_drop(history: list[dict]) -> float:
    """How much the per-epoch mean training loss still fell over the last fifth of training:
    L[E − ⌈E/5⌉] − L[E] for E epochs (NaN with fewer than 2 epochs). A converged run has a small value
    (the ``identifiability-tradeoff`` claim needs a converged standard network)."""
    losses = [float(r["train_loss"]) for r in history]
    if len(losses) < 2:
        return math.nan
    k = math.ceil(len(losses) / 5)
    return losses[-1 - k] - losses[-1]


# --------------------------------------------------------------------------- training loop
def train(model: nn.Module, data, cfg: dict, seed: int, device: torch.device,
          state_path: str | os.PathLike | None = None, state_digest: str | None = None,
          name: str = "") -> dict:
    """Train ``model`` in place; returns the per-epoch history and timing (``epochs: 0`` leaves the
    seeded initialisation untouched: the untrained arm of the swap-cost study).

    ``cfg`` is the study point's ``train`` block. With ``state_path`` the loop
    saves a resumable state every ``checkpoint_every`` epochs and resumes from it
    if it exists and was written under ``state_digest`` (see ``usable_state``);
    the state file is removed on completion. ``name`` labels the model in errors.
    """
    task = data.task
    x, y = data.x["train"], data.y["train"]
    n = len(x)
    bs = int(cfg["batch_size"])
    steps_per_epoch = math.ceil(n / bs)
    cfg = dict(cfg, _steps_per_epoch=steps_per_epoch)
    epochs = int(cfg["epochs"])
    total_steps = epochs * steps_per_epoch
    precision = resolve_precision(cfg.get("precision", "auto"), device)
    augment = cfg.get("augment", "none")
    opt = make_optimizer(model, cfg)
    g_data = generator("data-order", seed)
    lossf = loss_fn(task)
    start_epoch, history = 0, []
    if usable_state(state_path, state_digest):
        start_epoch, history = load_state(state_path, model, opt, g_data)
        log.info(f"[train] resumed from {state_path} after epoch {start_epoch}")
    every = int(cfg.get("checkpoint_every", 0) or 0)
    # dropout and other random ops draw from the model's own stream (lmcflow.random_ops), as in a bundle
    randomness = SeededRandomness() if check_random_ops(model, tuple(x.shape[1:]), name or "the model") else None
    t0 = time.perf_counter()
    for epoch in range(start_epoch, epochs):
        model.train()
        perm = torch.randperm(n, generator=g_data).to(x.device)
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), device=device)
        for i in range(steps_per_epoch):
            step = epoch * steps_per_epoch + i
            lr = lr_at(step, total_steps, cfg)
            for group in opt.param_groups:
                group["lr"] = lr
            idx = perm[i * bs:(i + 1) * bs]
            xb, yb = x.index_select(0, idx), y.index_select(0, idx)  # = x[idx], several times faster
            if augment == "crop_flip":
                xb = augment_crop_flip(xb, g_data)
            with autocast(device, precision):
                if randomness is None:
                    out = model(xb)
                else:
                    with randomness.at(torch.tensor(step_key(seed, step), device=device)):
                        out = model(xb)
            out = out.float()
            loss = lossf(out.squeeze(-1), yb.float()) if task == "regression" else lossf(out, yb)
            if not torch.isfinite(loss):
                where = {"name": name, "seed": seed, "epoch": epoch + 1, "step": i + 1,
                         "steps_per_epoch": steps_per_epoch, "global_step": step, "lr": lr, "loss": loss.item()}
                raise DivergenceError(
                    f"training{' of ' + name if name else ''} diverged: loss={loss.item()} at epoch {epoch + 1}/"
                    f"{epochs}, step {i + 1}/{steps_per_epoch} (global step {step}), lr={lr:.4g}. No model was "
                    f"written; lower train.lr or raise train.warmup_epochs.", diverged=[where])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * len(idx)
            if task != "regression":
                correct += (out.argmax(1) == yb).sum()
        row = {"epoch": epoch + 1, "train_loss": loss_sum.item() / n,
               "train_acc": (correct.item() / n) if task != "regression" else float("nan"), "lr": lr}
        history.append(row)
        log.info(f"[train] epoch {epoch + 1}/{epochs} loss={row['train_loss']:.4f} acc={row['train_acc']:.4f} "
            f"lr={lr:.4g} elapsed={time.perf_counter() - t0:.1f}s")
        if state_path is not None and every and (epoch + 1) % every == 0 and epoch + 1 < epochs:
            save_state(state_path, model, opt, g_data, epoch + 1, history, state_digest)
    if state_path is not None and Path(state_path).exists():
        os.unlink(state_path)
    return {"history": history, "precision": precision, "train_seconds": time.perf_counter() - t0}
