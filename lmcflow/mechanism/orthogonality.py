"""Reciprocal orthogonality: how much of each layer's output one model's weights produce on the other model's
inputs (cross ratios, cross-transformation cosines, and their relabelled-copy baselines). The math:
``docs/mechanism.md``."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lmcflow.mechanism.common import batches, model_device, row_cosine, unit_permutation, unit_rows
from lmcflow.models import MLP, VGG11, ResNet20


def _weight_layers_and_inputs(model: nn.Module, x: torch.Tensor):
    """(modules producing each hidden layer, their inputs z_{l−1}) for MLP, VGG-11 and ResNet-20."""
    feats = model.hidden_features(x)
    if isinstance(model, MLP):
        return list(model.layers), [x.flatten(1)] + feats[:-1]
    if isinstance(model, VGG11):
        inputs = [x] + [F.max_pool2d(f, 2, ceil_mode=True) if pool else f
                        for f, pool in zip(feats[:-1], model.pool_after[:-1])]
        return list(model.convs), inputs
    if isinstance(model, ResNet20):  # main-path convolutions, each reading the previous hidden feature
        convs = [model.stem] + [c for blocks in model.stages for block in blocks for c in (block.conv1, block.conv2)]
        return convs, [x] + feats[:-1]
    raise NotImplementedError(f"reciprocal orthogonality is implemented for MLP, VGG11 and ResNet20, not "
                              f"{type(model).__name__}")


def _linear_part(layer: nn.Module, z: torch.Tensor) -> torch.Tensor:
    return layer(z) - layer(torch.zeros_like(z[:1]))


ORTHOGONALITY_COLUMNS = ("cross_ratio_a", "cross_ratio_b", "cross_cos", "cross_transform_cos",
                         "cross_ratio_permuted_a", "cross_ratio_permuted_b", "cross_transform_cos_permuted_a",
                         "cross_transform_cos_permuted_b", "own_norm_ratio", "own_input_cos_a", "own_input_cos_b")


@torch.no_grad()
def reciprocal_orthogonality_rows(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor,
                                  batch_size: int = 500) -> list[dict]:
    """Rows {layer, cross_ratio_a, cross_ratio_b, cross_cos, cross_transform_cos, cross_ratio_permuted_a,
    cross_ratio_permuted_b, cross_transform_cos_permuted_a, cross_transform_cos_permuted_b, own_norm_ratio,
    own_input_cos_a, own_input_cos_b}
    (``docs/mechanism.md`` §3)."""
    model_a.eval()
    model_b.eval()
    dev = model_device(model_a)
    acc, rows_seen, perms = None, None, {}
    for xb in batches(x, batch_size, dev):
        la, za = _weight_layers_and_inputs(model_a, xb)
        lb, zb = _weight_layers_and_inputs(model_b, xb)
        if acc is None:
            acc = torch.zeros(len(la), 12, dtype=torch.float64)
            rows_seen = torch.zeros(len(la), dtype=torch.float64)
            for role, layers, z in (("a", la, za), ("b", lb, zb)):
                for j in range(len(layers)):
                    p = unit_permutation(z[j].shape[1], role, j + 1).to(dev)
                    n_out = _linear_part(layers[j], z[j][:1]).shape[1]
                    perms[role, j] = (p, torch.argsort(p), unit_permutation(n_out, f"{role}-out", j + 1).to(dev))
        for j in range(len(la)):
            aa, ab = _linear_part(la[j], za[j]).double(), _linear_part(la[j], zb[j]).double()
            bb, ba = _linear_part(lb[j], zb[j]).double(), _linear_part(lb[j], za[j]).double()
            rows_seen[j] += len(unit_rows(aa))
            acc[j, 0] += ab.pow(2).sum().cpu()
            acc[j, 1] += aa.pow(2).sum().cpu()
            acc[j, 2] += ba.pow(2).sum().cpu()
            acc[j, 3] += bb.pow(2).sum().cpu()
            acc[j, 4] += row_cosine(ab + ba, aa + bb).sum().cpu()
            acc[j, 5] += row_cosine(aa + bb + ab + ba, aa + bb).sum().cpu()
            acc[j, 10] += row_cosine(aa + ab, aa).sum().cpu()  # A's layer on the merged input vs on its own
            acc[j, 11] += row_cosine(bb + ba, bb).sum().cpu()
            for c, (role, layer, z, own) in enumerate((("a", la[j], za[j], aa), ("b", lb[j], zb[j], bb))):
                p, p_inv, q = perms[role, j]
                moved = _linear_part(layer, z[:, p]).double()  # W P z: the copy's input read by the model
                back = _linear_part(layer, z[:, p_inv]).double()[:, q]  # Q W Pᵀ z: the model's input read by the copy
                direct = own + own[:, q]
                acc[j, 6 + c] += moved.pow(2).sum().cpu()
                acc[j, 8 + c] += row_cosine(direct + moved + back, direct).sum().cpu()

    def ratio(num, den):
        return float((num / den).sqrt()) if den > 0 else float("nan")

    rows = []
    for j in range(acc.shape[0]):
        s, n = acc[j], rows_seen[j]
        rows.append({"layer": j + 1, "cross_ratio_a": ratio(s[0], s[1]), "cross_ratio_b": ratio(s[2], s[3]),
                     "cross_cos": float(s[4] / n), "cross_transform_cos": float(s[5] / n),
                     "cross_ratio_permuted_a": ratio(s[6], s[1]), "cross_ratio_permuted_b": ratio(s[7], s[3]),
                     "cross_transform_cos_permuted_a": float(s[8] / n),
                     "cross_transform_cos_permuted_b": float(s[9] / n),
                     "own_norm_ratio": ratio(s[3], s[1]), "own_input_cos_a": float(s[10] / n),
                     "own_input_cos_b": float(s[11] / n)})
    return rows
