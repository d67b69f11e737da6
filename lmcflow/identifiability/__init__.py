"""Neuron-identifiability metrics (Bürgin, Herbst, Lin, Jegelka, 2026): activation matching (``matching``),
principal subspaces and coherence (``subspaces``), realization and swap costs (``realization``, applied to a
model's layers by ``swap_analysis``) and barrier summaries (``barriers``). Rows are plain dicts for the tables
``identifiability``, ``identifiability_lmc``, ``swap_costs`` and ``coherence``; callers add the study, point and
seed columns."""
from lmcflow.identifiability.barriers import lmc_summary_row, path_barrier_row, regression_midpoint_barrier
from lmcflow.identifiability.matching import activation_matching_rows, matching_objective
from lmcflow.identifiability.realization import (
    anisotropy,
    anisotropy_bound,
    masked_grams,
    realization_costs,
    ridge_post_activation_costs,
    ridge_realization_costs,
    ridge_summary,
    swap_costs,
    swap_summary,
)
from lmcflow.identifiability.subspaces import (
    coherence_row,
    intrinsic_dimension,
    principal_components,
    principal_subspace,
    subspace_coherence,
)
from lmcflow.identifiability.swap_analysis import layer_inputs, layer_mask_offset, swap_cost_analysis, swap_cost_long

__all__ = ["lmc_summary_row", "matching_objective", "activation_matching_rows", "principal_subspace",
           "principal_components", "intrinsic_dimension", "subspace_coherence", "coherence_row", "masked_grams",
           "realization_costs", "swap_costs", "swap_summary", "ridge_realization_costs",
           "ridge_post_activation_costs", "ridge_summary", "anisotropy", "anisotropy_bound", "layer_inputs",
           "layer_mask_offset", "swap_cost_analysis", "swap_cost_long", "regression_midpoint_barrier",
           "path_barrier_row"]
