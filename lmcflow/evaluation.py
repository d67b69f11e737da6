"""Evaluation on in-memory tensors, and the device and precision every job runs at: which device
(``resolve_device``, fp32 meaning IEEE fp32 on GPUs too), which precision training autocasts to
(``resolve_precision``, ``autocast``), the task's loss, a model's fp32 outputs (``predict``), loss and
accuracy from outputs (``metrics_from_outputs``, ``evaluate``) and the BatchNorm statistics reset
(``reset_bn_stats``). Training, merging, REPAIR and the mechanism analyses all build on it; it imports
nothing of lmcflow.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


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
