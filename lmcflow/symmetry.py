"""Layer factories that optionally break permutation symmetry.

Details: docs/internals.md, "`lmcflow.symmetry`".
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from lmcflow.config.catalog import (  # noqa: F401  (check_symmetry and the names: re-exported)
    FIXED_SCALINGS,
    MASK_TYPES,
    SYMMETRY_KEYS,
    SYMMETRY_KINDS,
    check_symmetry,
    symmetry_error,
)
from lmcflow.seeding import generator


def _per_layer(sym: dict, key: str, index: int):
    v = sym[key]
    if isinstance(v, (list, tuple)):
        if index >= len(v):
            raise symmetry_error(key, f"has {len(v)} entries but layer index {index} needs one "
                            f"(give one entry per weight layer, head included, or a single number)")
        return v[index]
    return v


def resolve_n_fixed(value, fan_in: int) -> int:
    """Fixed entries per row for a layer with ``fan_in`` inputs (see module doc: clipped to fan_in − 1)."""
    n = int(round(value * fan_in)) if isinstance(value, float) else int(value)
    if isinstance(value, float):
        n = max(1, n)
    return max(0, min(n, fan_in - 1))


def _fixed_scale(sym: dict, index: int, fan_in: int) -> float:
    s = float(sym["sigma_f"]) * float(_per_layer(sym, "sigma_f_scale", index))
    if sym["fixed_scaling"] == "fan_in":
        s /= math.sqrt(fan_in)
    return s


def make_mask_offset(shape: tuple, sym: dict, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(D, offset, n_fixed) for a weight of ``shape`` (out, in[, k, k]) at layer ``index``.

    Deterministic in (mask_seed, index, shape): drawn on the CPU from SHA-256
    derived seeds, so every process builds the same tensors. F is drawn for the
    whole matrix before masking, so changing σ_F or n_fixed keeps the values.
    """
    sym = check_symmetry(sym)
    out_dim = shape[0]
    fan_in = int(math.prod(shape[1:]))
    seed = int(sym["mask_seed"])
    kind = sym["kind"]
    f = torch.randn(out_dim, fan_in, generator=generator("symmetry-offset", seed, index))
    if kind == "syre":
        mask = torch.ones(out_dim, fan_in)
        n_fixed = 0
    elif kind == "w_asymmetric":
        g = generator("symmetry-mask", seed, index)
        if sym["mask_type"] == "bernoulli":
            mask = (torch.rand(out_dim, fan_in, generator=g) < float(sym["mask_density"])).float()
            n_fixed = -1  # varies per row
        else:
            n_fixed = resolve_n_fixed(_per_layer(sym, "n_fixed", index), fan_in)
            order = torch.rand(out_dim, fan_in, generator=g).argsort(dim=1)
            mask = torch.ones(out_dim, fan_in)
            mask.scatter_(1, order[:, :n_fixed], 0.0)
    else:
        raise ValueError(f"make_mask_offset: kind {kind!r} has no mask")
    # w_asymmetric: offsets only at fixed positions; syre: dense offsets added to W.
    offset = (f if kind == "syre" else (1.0 - mask) * f) * _fixed_scale(sym, index, fan_in)
    return mask.reshape(shape), offset.reshape(shape), n_fixed


class _FixedMixin:
    """Shared by AsymLinear and AsymConv2d: W_eff = mask⊙weight + offset."""

    def _init_fixed(self, mask: torch.Tensor, offset: torch.Tensor, kind: str, n_fixed: int) -> None:
        self.register_buffer("mask", mask.to(self.weight.dtype))
        self.register_buffer("offset", offset.to(self.weight.dtype))
        self.symmetry_kind = kind
        self.n_fixed = n_fixed
        with torch.no_grad():
            self.weight.mul_(self.mask)  # trainable part is zero at fixed positions

    def effective_weight(self) -> torch.Tensor:
        return self.mask * self.weight + self.offset

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, symmetry={self.symmetry_kind}, n_fixed={self.n_fixed}"


class AsymLinear(_FixedMixin, nn.Linear):
    def __init__(self, d_in: int, d_out: int, bias: bool, mask, offset, kind: str, n_fixed: int):
        nn.Linear.__init__(self, d_in, d_out, bias=bias)
        self._init_fixed(mask, offset, kind, n_fixed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.effective_weight(), self.bias)


class AsymConv2d(_FixedMixin, nn.Conv2d):
    def __init__(self, c_in, c_out, k, stride, padding, bias, mask, offset, kind: str, n_fixed: int):
        nn.Conv2d.__init__(self, c_in, c_out, k, stride=stride, padding=padding, bias=bias)
        self._init_fixed(mask, offset, kind, n_fixed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.effective_weight(), self.bias)


class SigmaGate(nn.Module):
    """x ↦ sigmoid(Cx)⊙x with a fixed random C (over the channel dim for (N, C, H, W) inputs)."""

    def __init__(self, c: torch.Tensor):
        super().__init__()
        self.register_buffer("C", c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.movedim(1, -1)  # a no-op on (N, C); written without a branch so torch.fx can trace it
        return (torch.sigmoid(F.linear(xc, self.C)) * xc).movedim(-1, 1)


def make_linear(d_in: int, d_out: int, bias: bool, sym: dict | None, index: int) -> nn.Module:
    s = check_symmetry(sym)
    if s["kind"] in ("standard", "sigma_asymmetric"):
        return nn.Linear(d_in, d_out, bias=bias)
    mask, offset, n_fixed = make_mask_offset((d_out, d_in), s, index)
    return AsymLinear(d_in, d_out, bias, mask, offset, s["kind"], n_fixed)


def make_conv2d(c_in: int, c_out: int, k: int, stride: int, padding: int, bias: bool,
                sym: dict | None, index: int) -> nn.Module:
    s = check_symmetry(sym)
    if s["kind"] in ("standard", "sigma_asymmetric"):
        return nn.Conv2d(c_in, c_out, k, stride=stride, padding=padding, bias=bias)
    mask, offset, n_fixed = make_mask_offset((c_out, c_in, k, k), s, index)
    return AsymConv2d(c_in, c_out, k, stride, padding, bias, mask, offset, s["kind"], n_fixed)


def make_gate(n: int, sym: dict | None, index: int) -> nn.Module:
    """Module applied after a hidden layer's activation (identity unless a gate is configured)."""
    s = check_symmetry(sym)
    if s["kind"] != "sigma_asymmetric":
        return nn.Identity()
    c = torch.randn(n, n, generator=generator("symmetry-gate", int(s["mask_seed"]), index))
    scale = float(s["gate_scale"]) / (math.sqrt(n) if s["fixed_scaling"] == "fan_in" else 1.0)
    return SigmaGate(c * scale)


# --------------------------------------------------------------------------- accessors
def is_asymmetric(module: nn.Module) -> bool:
    return isinstance(module, _FixedMixin)


def effective_weight(module: nn.Module) -> torch.Tensor:
    """W_eff of a linear / conv layer: mask⊙weight + offset, or the plain weight."""
    if isinstance(module, _FixedMixin):
        return module.effective_weight()
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        return module.weight
    raise TypeError(f"effective_weight: {type(module).__name__} is not a linear or conv layer")


def trainable_weight_norm(model: nn.Module) -> float:
    """‖·‖₂ over the trainable weight entries of every linear and conv layer (a masked layer: mask⊙W, the part that
    realises its features; biases and norm parameters left out): the norm budget the identifiability paper's
    trade-off speaks of."""
    total = 0.0
    for m in model.modules():
        if isinstance(m, _FixedMixin):
            total += float((m.mask * m.weight).detach().double().pow(2).sum())
        elif isinstance(m, (nn.Linear, nn.Conv2d)):
            total += float(m.weight.detach().double().pow(2).sum())
    return total ** 0.5


def fixed_entry_count(model: nn.Module) -> int:
    """Weight entries held fixed by masks (they are parameters but never train)."""
    return int(sum((m.mask == 0).sum().item() for m in model.modules() if isinstance(m, _FixedMixin)))


def effective_state_dict(model: nn.Module) -> dict:
    """State dict in dense-equivalent form: weight = W_eff, mask = 1, offset = 0.

    Loading it into the same architecture gives the same function. Useful when a
    model is permuted by an alignment: permuting W_eff of the dense form keeps
    masks binary and makes interpolation act on W_eff.
    """
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for name, m in model.named_modules():
        if isinstance(m, _FixedMixin):
            p = f"{name}." if name else ""
            sd[p + "weight"] = m.effective_weight().detach().clone()
            sd[p + "mask"] = torch.ones_like(m.mask)
            sd[p + "offset"] = torch.zeros_like(m.offset)
    return sd
