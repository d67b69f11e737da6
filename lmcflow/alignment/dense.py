"""Models with symmetry-breaking layers in dense form (W_eff, mask 1, offset 0), where permutation and
interpolation act on the effective weights.
"""
from __future__ import annotations

from torch import nn

from lmcflow.symmetry import effective_state_dict, is_asymmetric


def has_asymmetric_layers(model: nn.Module) -> bool:
    return any(is_asymmetric(m) for m in model.modules())


def to_dense_form(model: nn.Module) -> bool:
    """Load ``effective_state_dict(model)`` into ``model`` in place if it has symmetry-breaking layers.

    W-asymmetric / SyRe layers keep W_eff = mask⊙W + offset with a fixed mask and offset; permuting
    the stored W alone would move trainable entries onto fixed positions. In the dense form
    (weight = W_eff, mask = 1, offset = 0) the model computes the same function, weight matching
    reads W_eff, and permutation plus interpolation act on W_eff. Returns True if converted.
    """
    if not has_asymmetric_layers(model):
        return False
    model.load_state_dict(effective_state_dict(model))
    return True
