"""Models with symmetry-breaking layers in dense form (W_eff, mask 1, offset 0), where permutation and
interpolation act on the effective weights.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from lmcflow.alignment.spec import apply_permutation, permutation_spec
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


def aligned_pair(model_a: torch.nn.Module, model_b: torch.nn.Module, perms: dict | None
                 ) -> tuple[torch.nn.Module, torch.nn.Module, bool]:
    """Copies of (model A, model B permuted onto A by ``perms``; None = identity) and whether they are in dense
    form: models with symmetry-breaking layers are returned in dense form (``alignment.to_dense_form``)."""
    model_a, model_b = copy.deepcopy(model_a), copy.deepcopy(model_b)
    dense = to_dense_form(model_a)
    to_dense_form(model_b)
    if perms is not None:
        model_b.load_state_dict(apply_permutation(permutation_spec(model_b), model_b.state_dict(), perms))
    return model_a, model_b, dense
