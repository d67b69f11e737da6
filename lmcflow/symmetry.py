"""Layer factories that optionally break permutation symmetry.

``sym`` is the ``model.symmetry`` block of a study point (``{"kind": "standard"}``
or absent for an ordinary network). Models build every weight layer through
these factories, passing the layer's index so per-layer settings apply.
"""
from __future__ import annotations

from torch import nn

SYMMETRY_KINDS = ("standard",)


def _kind(sym: dict | None) -> str:
    kind = (sym or {}).get("kind", "standard")
    if kind not in SYMMETRY_KINDS:
        raise ValueError(f"model.symmetry.kind={kind!r} is unknown; allowed: {', '.join(SYMMETRY_KINDS)}")
    return kind


def make_linear(d_in: int, d_out: int, bias: bool, sym: dict | None, index: int) -> nn.Module:
    _kind(sym)
    return nn.Linear(d_in, d_out, bias=bias)


def make_conv2d(c_in: int, c_out: int, k: int, stride: int, padding: int, bias: bool,
                sym: dict | None, index: int) -> nn.Module:
    _kind(sym)
    return nn.Conv2d(c_in, c_out, k, stride=stride, padding=padding, bias=bias)


def make_gate(n: int, sym: dict | None, index: int) -> nn.Module:
    """Module applied after a hidden layer's activation (identity unless a gate is configured)."""
    _kind(sym)
    return nn.Identity()
