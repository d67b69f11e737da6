"""Permutation alignment of two networks (Git Re-Basin style): the permutation spec's table and
``apply_permutation`` (``table``), the spec of a model (``spec``: lmcflow's architectures by rule, any other
model derived from its traced graph by ``derive`` with the op rules of ``graph_axes``, ``graph_rules`` and
``graph_modules``, and proven by ``proof``; ``coverage`` counts the hidden axes it permutes), the alignment
methods and ``align`` (``methods``), the dense form of symmetry-breaking layers and a pair aligned in it
(``dense``), and permutation files (``storage``)."""
from lmcflow.alignment.dense import aligned_pair, has_asymmetric_layers, to_dense_form
from lmcflow.alignment.methods import (
    METHODS,
    activation_matching,
    align,
    identity,
    random_permutation,
    weight_matching,
    weight_matching_objective,
)
from lmcflow.alignment.spec import PermutationSpec, apply_permutation, permutation_spec
from lmcflow.alignment.storage import load_alignment_block, load_permutation_sets, save_permutation_sets

__all__ = ["METHODS", "PermutationSpec", "permutation_spec", "apply_permutation", "identity",
           "weight_matching", "weight_matching_objective", "activation_matching", "random_permutation",
           "align", "save_permutation_sets", "load_permutation_sets", "load_alignment_block", "aligned_pair",
           "has_asymmetric_layers", "to_dense_form"]
