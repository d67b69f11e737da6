"""Training and evaluation on in-memory tensors.

Short, direct PyTorch in the style of airbench: the whole dataset lives on the
device, each epoch draws one permutation from a seeded generator, and the
learning rate is a pure function of the step, so a resumed run continues with
exactly the same sequence of batches and learning rates.
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from torch import nn

from lmcflow.io import CorruptFileError, load_tensors, save_tensors
from lmcflow.random_ops import SeededRandomness, check_random_ops, step_key
from lmcflow.seeding import generator

log = logging.getLogger(__name__)


class DivergenceError(RuntimeError):
    """Training produced a non-finite loss. For a bundle, ``diverged`` describes every diverged member
    (name, epoch, step, global step, lr, loss) and ``results`` holds every member's training result."""

    def __init__(self, message: str, diverged: list | None = None, results: list | None = None):
        super().__init__(message)
        self.diverged = diverged or []
        self.results = results or []


def resolve_device(choice: str = "auto") -> torch.device:
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError("device: cuda was requested but torch sees no CUDA device; use device: auto or cpu")
        use_strict_fp32_on_cuda()
    return torch.device(choice)


def use_strict_fp32_on_cuda() -> None:
    """fp32 means IEEE fp32 on GPUs too.

    cuDNN convolutions default to TF32 on Ampere and later (10-bit mantissa), which would make
    every "fp32" metric of a conv net a reduced-precision one. Reduced precision is an explicit
    lever (``train.precision: bf16``, the default on GPUs via ``auto``), never a silent one.
    cuBLAS needs a fixed workspace to be deterministic; it must be set before its first use.
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def cpu_has_fast_bf16() -> bool:
    """AMX or AVX512-BF16: bf16 matmuls are then several times faster than fp32."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def resolve_precision(choice: str, device: torch.device) -> str:
    """``auto`` picks bf16 autocast only where the hardware runs it fast."""
    if choice != "auto":
        return choice
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_fast_bf16() else "fp32"


def autocast(device: torch.device, precision: str):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=(precision == "bf16"))


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
                                 weight_decay=cfg["weight_decay"])
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


def loss_fn(task: str):
    return F.mse_loss if task == "regression" else F.cross_entropy


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    """Model outputs in fp32, eval mode (metrics are never computed in reduced precision)."""
    model.eval()
    return torch.cat([model(x[i:i + batch_size]).float() for i in range(0, len(x), batch_size)])


def metrics_from_outputs(out: torch.Tensor, y: torch.Tensor, task: str) -> dict:
    if task == "regression":
        return {"loss": F.mse_loss(out.squeeze(-1), y.float()).item(), "acc": float("nan")}
    return {"loss": F.cross_entropy(out, y).item(), "acc": (out.argmax(1) == y).float().mean().item()}


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, task: str = "classification") -> dict:
    return metrics_from_outputs(predict(model, x), y, task)


def reset_bn_stats(model: nn.Module, x: torch.Tensor, batch_size: int = 1000) -> None:
    """Re-estimate BatchNorm running statistics with one pass over ``x``; leaves ``model`` in eval.

    As ``torch.optim.swa_utils.update_bn``: the statistics are zeroed and momentum is None for the pass, so they
    are an exact cumulative average over the batches and do not depend on the batch order's recency. Unlike it,
    only the BatchNorm layers are in train mode: dropout and other train-mode randomness stay off, so the
    statistics are those of the network that is evaluated, and the same on every run.
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    model.eval()
    if not bns:
        return
    momenta = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    with torch.no_grad():
        for xb in x.split(batch_size):
            model(xb)
    for m, momentum in zip(bns, momenta, strict=True):
        m.momentum = momentum
    model.eval()


# --------------------------------------------------------------------------- resumable state
def _optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict, dict]:
    sd = opt.state_dict()
    tensors, scalars = {}, {"param_groups": sd["param_groups"], "state": {}}
    for idx, st in sd["state"].items():
        for key, val in st.items():
            if isinstance(val, torch.Tensor):
                tensors[f"opt/{idx}/{key}"] = val
            else:
                scalars["state"].setdefault(str(idx), {})[key] = val
    return tensors, scalars


def _restore_optimizer(opt, tensors: dict, scalars: dict) -> None:
    state: dict = {}
    for name, val in tensors.items():
        if name.startswith("opt/"):
            _, idx, key = name.split("/", 2)
            state.setdefault(int(idx), {})[key] = val
    for idx, st in scalars["state"].items():
        state.setdefault(int(idx), {}).update(st)
    opt.load_state_dict({"state": state, "param_groups": scalars["param_groups"]})


def save_state(path, model, opt, g_data: torch.Generator, epoch: int, history: list,
               digest: str | None = None) -> None:
    """Everything needed to continue training bit-identically after ``epoch`` epochs.

    ``digest`` identifies the configuration that produced the state (``lmcflow.jobs.train.train_digest``);
    a later run with another configuration discards the state instead of resuming it.
    """
    opt_t, opt_s = _optimizer_tensors(opt)
    write_state(path, model.state_dict(), opt_t, opt_s, g_data, epoch, history, digest)


def write_state(path, model_state: dict, opt_tensors: dict, opt_scalars: dict, g_data: torch.Generator,
                epoch: int, history: list, digest: str | None) -> None:
    """The state file format shared by single-model and bundled training (a state written by one
    resumes in the other): ``model/<name>``, ``opt/<param index>/<key>``, ``rng/data``, ``rng/torch``
    tensors; epoch, optimizer scalars, history and config digest as metadata."""
    tensors = {f"model/{k}": v for k, v in model_state.items()}
    tensors.update(opt_tensors)
    tensors["rng/data"] = g_data.get_state()
    tensors["rng/torch"] = torch.get_rng_state()
    save_tensors(path, tensors, {"epoch": epoch, "optimizer": opt_scalars, "history": history, "digest": digest})


def read_state(path) -> tuple[dict, dict]:
    """(tensors, metadata) of a state file written by ``write_state``."""
    return load_tensors(path, rebuild_hint="a fresh training run (delete the state file)")


def load_state(path, model, opt, g_data: torch.Generator) -> tuple[int, list]:
    tensors, meta = read_state(path)
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model/")})
    _restore_optimizer(opt, tensors, meta["optimizer"])
    g_data.set_state(tensors["rng/data"])
    torch.set_rng_state(tensors["rng/torch"])
    return int(meta["epoch"]), list(meta["history"])


def late_loss_drop(history: list[dict]) -> float:
    """How much the per-epoch mean training loss still fell over the last fifth of training:
    L[E − ⌈E/5⌉] − L[E] for E epochs (NaN with fewer than 2 epochs). A converged run has a small value
    (the ``identifiability-tradeoff`` claim needs a converged standard network)."""
    losses = [float(r["train_loss"]) for r in history]
    if len(losses) < 2:
        return math.nan
    k = math.ceil(len(losses) / 5)
    return losses[-1 - k] - losses[-1]


def usable_state(path, digest: str | None) -> bool:
    """True if a resumable state exists at ``path`` and was written for configuration ``digest``.

    A state of another configuration (or without a digest, when one is expected) is deleted with a
    warning: resuming it would continue stale weights under a changed config. ``digest=None``
    accepts any state.
    """
    if path is None or not Path(path).exists():
        return False
    if digest is None:
        return True
    try:
        with safe_open(str(path), framework="pt") as fh:
            stored = json.loads((fh.metadata() or {}).get("lmcflow", "{}")).get("digest")
    except (SafetensorError, OSError, ValueError) as err:
        raise CorruptFileError(f"{path}: cannot be read as a training state ({err}). Delete it; the model "
                               f"then trains from scratch.") from err
    if stored == digest:
        return True
    log.warning(f"[train] {path}: state of another configuration (digest {str(stored)[:12]}, expected "
                f"{digest[:12]}); deleted, training from scratch")
    os.unlink(path)
    return False


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
