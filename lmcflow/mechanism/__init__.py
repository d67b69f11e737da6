"""Mechanism metrics of the width paper (LEWC/LLFC, weak additivity, reciprocal orthogonality, low rank, neuron
activity) for two aligned models, per hidden layer; ``layer_metrics`` joins them into the rows of
``layer_metrics.parquet``, ``active_overlap_rows`` sweeps the activity threshold τ (``active_overlap.parquet``).
λ is the paper's weight on θ_A. Definitions and derivations: ``docs/mechanism.md``."""
from lmcflow.mechanism.activity import (
    active_overlap_rows,
    active_units,
    independent_jaccard,
    neuron_activity_rows,
    second_moments,
)
from lmcflow.mechanism.common import (
    DEFAULT_ACTIVE_THRESHOLD,
    DEFAULT_ENERGY,
    paper_interpolation,
    per_sample_cosine,
    perturbed_copy,
    perturbed_state,
    row_cosine,
    sample_permutation,
    unit_permutation,
    unit_rows,
)
from lmcflow.mechanism.layers import layer_metrics
from lmcflow.mechanism.lewc import gaussian_weak_additivity, lewc_rows, weak_additivity_rows
from lmcflow.mechanism.orthogonality import ORTHOGONALITY_COLUMNS, reciprocal_orthogonality_rows
from lmcflow.mechanism.rank import (
    hidden_layer_weights,
    random_rank_reference,
    rank_stats,
    singular_values,
    weight_rank_rows,
)

__all__ = [
    "DEFAULT_ACTIVE_THRESHOLD",
    "DEFAULT_ENERGY",
    "ORTHOGONALITY_COLUMNS",
    "active_overlap_rows",
    "active_units",
    "gaussian_weak_additivity",
    "hidden_layer_weights",
    "independent_jaccard",
    "layer_metrics",
    "lewc_rows",
    "neuron_activity_rows",
    "paper_interpolation",
    "per_sample_cosine",
    "perturbed_copy",
    "perturbed_state",
    "random_rank_reference",
    "rank_stats",
    "reciprocal_orthogonality_rows",
    "row_cosine",
    "sample_permutation",
    "second_moments",
    "singular_values",
    "unit_permutation",
    "unit_rows",
    "weak_additivity_rows",
    "weight_rank_rows",
]
