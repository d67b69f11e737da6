"""``layer_metrics``: every mechanism metric of two (aligned) models, one row per (hidden layer, λ), for
``layer_metrics.parquet``."""
from __future__ import annotations

import torch
from torch import nn

from lmcflow.mechanism.activity import neuron_activity_rows
from lmcflow.mechanism.common import DEFAULT_ACTIVE_THRESHOLD, DEFAULT_ENERGY, perturbed_copy
from lmcflow.mechanism.lewc import gaussian_weak_additivity, lewc_rows, weak_additivity_rows
from lmcflow.mechanism.orthogonality import ORTHOGONALITY_COLUMNS, reciprocal_orthogonality_rows
from lmcflow.mechanism.rank import weight_rank_rows


def layer_metrics(model_a: nn.Module, model_b: nn.Module, x: torch.Tensor, lambdas, batch_size: int = 500,
                  x_bn: torch.Tensor | None = None, energy: float = DEFAULT_ENERGY,
                  active_threshold: float = DEFAULT_ACTIVE_THRESHOLD, perturbation_seed=0) -> list[dict]:
    """One row per (layer, λ) with every metric above; λ-independent metrics repeat on each λ.

    ``lewc_cos_perturbed`` is ``lewc_cos`` of A and ``perturbed_copy(A, B, perturbation_seed)``. Metrics an
    architecture does not support (weak additivity without pre-activations, reciprocal orthogonality outside
    MLP / VGG-11 / ResNet-20) are NaN.
    """
    rows = lewc_rows(model_a, model_b, x, lambdas, batch_size, x_bn)
    perturbed = lewc_rows(model_a, perturbed_copy(model_a, model_b, perturbation_seed), x, lambdas, batch_size, x_bn,
                          shuffled=False)
    perturbed = {(r["layer"], r["lam_paper"]): r["lewc_cos"] for r in perturbed}
    try:
        extra_lam = weak_additivity_rows(model_a, model_b, x, lambdas, batch_size)
    except NotImplementedError:
        extra_lam = [{"layer": r["layer"], "lam_paper": r["lam_paper"], "weak_additivity": float("nan"),
                      "weak_additivity_shuffled": float("nan"), "weak_additivity_lewc": float("nan"),
                      "weak_additivity_gaussian": gaussian_weak_additivity(r["lam_paper"]),
                      "weak_additivity_lewc_gaussian": float("nan")} for r in rows]
    by_layer: dict[int, dict] = {}
    try:
        for r in reciprocal_orthogonality_rows(model_a, model_b, x, batch_size):
            by_layer.setdefault(r["layer"], {}).update(r)
    except NotImplementedError:
        pass
    for r in weight_rank_rows(model_a, model_b, energy):
        by_layer.setdefault(r["layer"], {}).update(r)
    for r in neuron_activity_rows(model_a, model_b, x, active_threshold, batch_size):
        by_layer.setdefault(r["layer"], {}).update(r)
    lam_extra = {(r["layer"], r["lam_paper"]): r for r in extra_lam}
    out = []
    for r in rows:
        row = dict(r)
        row["lewc_cos_perturbed"] = perturbed[(r["layer"], r["lam_paper"])]
        row.update({k: v for k, v in lam_extra[(r["layer"], r["lam_paper"])].items() if k not in row})
        row.update({k: v for k, v in by_layer.get(r["layer"], {}).items() if k not in row})
        for k in ORTHOGONALITY_COLUMNS:
            row.setdefault(k, float("nan"))
        out.append(row)
    return out
