"""How much of a model a permutation spec aligns: the hidden parameter axes (trainable tensors' axes of more than
one unit that are neither kernel positions nor tied to the model's input or output) and how many of them a group
permutes, overall and per module."""
from __future__ import annotations

from lmcflow.alignment.table import PermutationSpec

_ENDS = ("the model's input", "the model's output")


def hidden_axes(spec: PermutationSpec, shapes: dict) -> dict:
    """{"key:axis": group or None} over the hidden axes (module doc); ``shapes``: {key: shape}."""
    out = {}
    for key in spec.parameters:
        for d, g in enumerate(spec.axes[key]):
            if shapes[key][d] < 2:
                continue
            why = spec.fixed.get(f"{key}:{d}")
            if g is not None or (why is not None and why not in _ENDS):
                out[f"{key}:{d}"] = g
    return out


def coverage(spec: PermutationSpec, shapes: dict) -> float:
    """Fraction of the hidden axes a group permutes (1.0 when there are none)."""
    axes = hidden_axes(spec, shapes)
    return sum(g is not None for g in axes.values()) / len(axes) if axes else 1.0


def coverage_by_module(spec: PermutationSpec, shapes: dict) -> dict:
    """{module path: (permuted hidden axes, hidden axes)} in state_dict order."""
    out: dict = {}
    for name, g in hidden_axes(spec, shapes).items():
        module = name.rpartition(":")[0].rpartition(".")[0]
        done, total = out.get(module, (0, 0))
        out[module] = (done + (g is not None), total + 1)
    return out
