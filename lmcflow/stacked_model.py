"""K models of one structure as one stacked model: their parameters and buffers stacked along a new dim 0
(``Stack``), one ``torch.func.vmap`` forward over them and each member's mean loss (``bundle_forward``), and each
member's state and optimizer state sliced back out. ``lmcflow.bundle_training`` trains bundles with it."""
from __future__ import annotations

import copy
import logging

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

from lmcflow.evaluation import autocast
from lmcflow.random_ops import SeededRandomness
from lmcflow.train_state import optimizer_tensors

log = logging.getLogger(__name__)


class Stack:
    """Parameters and buffers of K same-structure models stacked along a new dim 0.

    Weights of plain ``nn.Linear`` layers are stored transposed, (K, in, out): under vmap the
    batched matmul then produces their gradient in the parameter's own layout, which saves a
    transposing copy of every weight gradient per step (~30% of a width-2 MLP step on this CPU).
    ``_from_layout`` gives a parameter in its module's layout for ``functional_call``.
    """

    def __init__(self, models: list[nn.Module]):
        first = models[0]
        self.base = copy.deepcopy(first).to("meta")
        self.transposed = {f"{n}.weight" if n else "weight" for n, m in first.named_modules()
                           if type(m) is nn.Linear}
        self.param_names = [n for n, p in first.named_parameters() if p.requires_grad]
        frozen = [n for n, p in first.named_parameters() if not p.requires_grad]
        self.buffer_names = frozen + [n for n, _ in first.named_buffers()]
        sds = [m.state_dict(keep_vars=True) for m in models]
        with torch.no_grad():
            self.params = {n: torch.stack([self._to_layout(n, sd[n].detach()) for sd in sds]).requires_grad_()
                           for n in self.param_names}
            self.buffers = {n: torch.stack([sd[n].detach() for sd in sds]) for n in self.buffer_names}

    def __len__(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def _to_layout(self, name: str, t: torch.Tensor) -> torch.Tensor:
        return t.t().contiguous() if name in self.transposed else t

    def _from_layout(self, name: str, t: torch.Tensor) -> torch.Tensor:
        return t.transpose(-1, -2) if name in self.transposed else t

    def train(self, mode: bool = True) -> None:
        self.base.train(mode)

    def member_state(self, k: int) -> dict:
        """State dict of member k (natural layouts, contiguous copies)."""
        with torch.no_grad():
            out = {n: self._from_layout(n, p[k]).detach().contiguous().clone() for n, p in self.params.items()}
            out.update({n: b[k].clone() for n, b in self.buffers.items()})
        return out

    def keep(self, rows: list[int]) -> None:
        """Drop every member not in ``rows`` (new leaves: the caller rebuilds its optimizer)."""
        with torch.no_grad():
            self.params = {n: p.detach()[rows].clone().requires_grad_() for n, p in self.params.items()}
            self.buffers = {n: b[rows].clone() for n, b in self.buffers.items()}

    # optimizer state: the same per-parameter keys as a single model's optimizer, sliced per member.
    # Every tensor is per element of its parameter except AdamW's step count, shared by the bundle.
    def _opt_names(self, opt: torch.optim.Optimizer) -> list[str]:
        """Parameter names in the optimizer's index order (its groups may reorder ``param_names``)."""
        names = {id(p): n for n, p in self.params.items()}
        return [names[id(p)] for g in opt.param_groups for p in g["params"]]

    def member_opt_state(self, opt: torch.optim.Optimizer, k: int) -> tuple[dict, dict]:
        """(tensors, scalars) of member k's optimizer state in ``train_state.write_state``'s format."""
        tensors, scalars = optimizer_tensors(opt)
        names = self._opt_names(opt)
        out = {}
        for key, val in tensors.items():
            _, idx, field = key.split("/", 2)
            name = names[int(idx)]
            out[key] = val.clone() if field == "step" else self._from_layout(name, val[k]).contiguous().clone()
        return out, scalars

    def load_opt_states(self, opt: torch.optim.Optimizer, states: list[tuple[dict, dict]]) -> None:
        """Stack the members' optimizer states (``member_opt_state`` / ``read_state`` format) into ``opt``."""
        first_t, first_s = states[0]
        names = self._opt_names(opt)
        state: dict = {}
        for key in first_t:
            _, idx, field = key.split("/", 2)
            name = names[int(idx)]
            vals = [t[key] for t, _ in states]
            if field == "step":  # equal for members at the same epoch
                if any(not torch.equal(v, vals[0]) for v in vals[1:]):
                    raise RuntimeError(f"optimizer state {key} differs between bundle members resuming at the "
                                       f"same epoch; delete their state files")
                val = vals[0].clone()
            else:
                val = torch.stack([self._to_layout(name, v) for v in vals])
            state.setdefault(int(idx), {})[field] = val
        for idx, st in first_s["state"].items():
            state.setdefault(int(idx), {}).update(st)
        opt.load_state_dict({"state": state, "param_groups": first_s["param_groups"]})


def member_losses(out: torch.Tensor, y: torch.Tensor, task: str) -> torch.Tensor:
    """Mean loss of each member: out (K, b, C) in fp32, y (K, b) -> (K,)."""
    if task == "regression":
        return ((out.squeeze(-1) - y.float()) ** 2).mean(1)
    k, b, c = out.shape
    return F.cross_entropy(out.reshape(k * b, c), y.reshape(k * b), reduction="none").view(k, b).mean(1)


def bundle_forward(stack: Stack, task: str, device: torch.device, precision: str, compile_mode,
                   random_ops: bool = False):
    """(params, buffers, xb, yb, keys) -> (per-member mean losses, fp32 outputs): the bundle's forward pass.

    With ``random_ops`` the model's random ops (dropout, ...) draw from each member's own stream
    (``lmcflow.random_ops``): ``keys`` holds the members' step keys (``random_ops.step_keys``), else it is None.

    ``compile_mode`` (``train.compile``: false, ``default`` or ``reduce-overhead``) wraps it in
    ``torch.compile`` on CUDA, where narrow models are bound by kernel launches; it is never used on
    the CPU. Compiled kernels fuse and reorder floating-point work, so results differ from eager
    ones at rounding level (resumable states stay valid: the digest ignores this key).
    """
    randomness = SeededRandomness() if random_ops else None

    def forward_losses(params, buffers, xb, yb, keys=None):
        views = {n: stack._from_layout(n, p) for n, p in params.items()}

        def call(p, b, xs):
            return functional_call(stack.base, (p, b), (xs,))

        def call_seeded(p, b, xs, key):
            with randomness.at(key):
                return functional_call(stack.base, (p, b), (xs,))

        with autocast(device, precision):
            out = vmap(call)(views, buffers, xb) if randomness is None else \
                vmap(call_seeded)(views, buffers, xb, keys)
        out = out.float()
        return member_losses(out, yb, task), out

    if not compile_mode or randomness is not None:
        if compile_mode and device.type == "cuda":
            log.info("[bundle] train.compile is not used for models with random ops; running eagerly")
        return forward_losses
    if device.type != "cuda":
        log.info(f"[bundle] train.compile={compile_mode!r} is for CUDA only; running eagerly on {device.type}")
        return forward_losses
    mode = None if compile_mode in (True, "default") else str(compile_mode)
    log.info(f"[bundle] compiling the bundle's forward and backward pass with torch.compile(mode={mode!r})")
    return torch.compile(forward_losses, mode=mode, dynamic=False)
