"""Permutation alignment of two networks (Git Re-Basin style): the permutation spec's table and
``apply_permutation`` (``table``), the spec of a model (``spec``: lmcflow's architectures by rule, any other
model derived from its traced graph by ``derive`` with the op rules of ``graph_axes``, ``graph_rules`` and
``graph_modules``, and proven by ``proof``; ``coverage`` counts the hidden axes it permutes), the alignment
methods and ``align`` (``methods``), the dense form of symmetry-breaking layers and a pair aligned in it
(``dense``), and permutation files (``storage``)."""
import importlib

# Each name from the module that defines it, imported when first asked for (PEP 562): a merge or mechanism job
# needs ``dense`` and ``storage`` only, and ``methods`` brings scipy.optimize, a quarter of a second of a job's
# start-up.
_HOME = {
    "aligned_pair": "dense", "has_asymmetric_layers": "dense", "to_dense_form": "dense",
    "METHODS": "methods", "activation_matching": "methods", "align": "methods", "identity": "methods",
    "random_permutation": "methods", "weight_matching": "methods", "weight_matching_objective": "methods",
    "PermutationSpec": "spec", "apply_permutation": "spec", "permutation_spec": "spec",
    "load_alignment_block": "storage", "load_permutation_sets": "storage", "save_permutation_sets": "storage",
}
__all__ = list(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
