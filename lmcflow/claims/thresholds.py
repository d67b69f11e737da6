"""Where every threshold and gate of the width claims (and subspace-coherence's headline) comes from, in one
place.

Each entry: a claim parameter (``claims.<id>.<name>`` in a config) -> (kind, the reason in words). Kinds: ``paper``
(the paper's statement, usually a sign), ``analytic`` (a reference computed from a model of unrelated parts, e.g.
independent Gaussian vectors), ``same-run`` (a reference measured in the same run) and ``convention`` (a tolerance
we chose, stated before the data). Every claim JSON records the entries of its parameters under ``thresholds``.
None of these values was chosen by which measured point it keeps or drops.
"""
from __future__ import annotations

SOURCES = {
    # gates
    "endpoint_max_drop": ("convention", "a working model is within 5 points of test accuracy of its point's seed "
                                        "median (seed spreads of the default run: at most 1.6 points)"),
    "endpoint_min_above_chance": ("convention", "keeps half of the median's lead over chance"),
    "endpoint_min_learned": ("convention", "a point's median closes a quarter of the way from chance to perfect "
                                           "accuracy"),
    "max_late_loss_drop": ("convention", "trained to a plateau: the training loss falls < 0.01 nats over the last "
                                         "fifth of the epochs (identifiability-tradeoff's convention)"),
    "null_min_share": ("convention", "the real pairs beat a null partner by at least a tenth of their margin over "
                                     "the headline threshold"),
    # barriers
    "max_gap_widest": ("convention", "2 points of test error: below the largest plain-average barrier the paper "
                                     "calls near zero at its widest widths (ResNet-20 32x: 2.69%; its MLP: 0.52%)"),
    "max_calibrated_gap_widest": ("convention", "0.05 nats, the paper's 'approaches zero' of the calibrated loss"),
    "min_reduction": ("convention", "calibration removes over half of the raw loss barrier"),
    "max_gain": ("convention", "one point of test error, the equivalence margin of 'no significant gain': the "
                               "paper's MLP Table-1 row (0.52% plain, -0.03% weight matching: gain 0.55) lies "
                               "inside it"),
    "min_gain_narrowest": ("paper", "permutations are needed where models are narrow: a gain > 0"),
    "max_permutation_sensitivity": ("convention", "one point of test error (Fig. 18: random permutations do not "
                                                  "degrade wide merges)"),
    "min_gap_difference": ("convention", "one point of test error"),
    "min_lewc_gap": ("paper", "weak weight decay breaks LEWC: a gap > 0"),
    # mechanism
    "min_gain_over_random_features": ("same-run", "random features: the same gain on pairs (A, untrained B of the "
                                                  "same architecture and width, full-rank random weights) of the same "
                                                  "run, paired by seed; the real pairs close over half of the gap to "
                                                  "1 that it leaves (convention: half, as gain_over_shuffled): the "
                                                  "paper's B takes part through trained low-rank weights a random B "
                                                  "lacks"),
    "min_gain_over_shuffled": ("same-run", "LEWC closes over half of the gap to 1 that the target built from the "
                                           "dominant model's features of other inputs leaves (convention: half)"),
    "min_gap_over_llfc": ("paper", "LEWC, not LLFC, describes the merged features: a gap > 0"),
    "min_net_excess_over_random_features": ("same-run", "random features: the same net excess on pairs (A, untrained "
                                                        "B of the same architecture and width) of the same run, "
                                                        "paired by seed; the real pairs exceed it (> 0)"),
    "min_net_excess": ("analytic", "the weak-additivity cosine of independent Gaussian vectors at each input's own "
                                   "norm balance (weak_additivity_reference), and its rise over equal norms "
                                   "(weak_additivity_gaussian): the excess over the first exceeds the second"),
    "max_shortfall_vs_shuffled": ("same-run", "not below the same cosine for unrelated inputs by more than 0.05 "
                                              "(convention)"),
    "max_ratio_widest": ("analytic", "unstructured (full-rank) weights read an independent input of the same norm "
                                     "as much as their own (ratio 1); the claim asks for at most half"),
    "max_excess_over_permuted": ("same-run", "not above each model against its own relabelled copy by more than 0.1 "
                                             "(convention)"),
    "max_rank_gap": ("paper", "weak weight decay raises the rank: default - weak < 0"),
    "max_fraction_of_random": ("analytic", "a random Gaussian matrix of the same shape; at least 10% below it "
                                           "(convention)"),
    "min_own_input_cos_over_random_features": ("same-run", "random features: the same worse own-input cosine on "
                                                           "pairs (A, untrained B of the same architecture and "
                                                           "width) of the same run, paired by seed; the real pairs "
                                                           "close over half of the gap to 1 that it leaves "
                                                           "(convention: half): ReLU features are non-negative, so a "
                                                           "random layer already exceeds 1/sqrt(2)"),
    "min_own_input_cos": ("analytic", "1/sqrt(2): what a full-rank random layer gives on its own input plus an "
                                      "independent one of the same norm (a floor: ReLU inputs are non-negative, so "
                                      "an untrained partner exceeds it; the headline is the random-feature "
                                      "reference)"),
    "max_shortfall_vs_permuted": ("same-run", "not below each model with its own relabelled copy by more than 0.05 "
                                              "(convention)"),
    "max_exponent_error": ("analytic", "half a layer: the fitted exponent is nearer LEWC's D than either neighbour "
                                       "D - 1, D + 1"),
    "max_log2_compensation_error": ("convention", "a factor 2"),
    "max_midpoint_r2_loss": ("convention", "linearly connected: the unaligned midpoint explains the target variance "
                                           "within 0.05 of its better endpoint (R², the endpoint gate's tolerance "
                                           "endpoint_max_drop); against the better endpoint, so a useless partner "
                                           "cannot meet it"),
    "trend_from_width": ("convention", "trends over the upper part of the grid, from x1 up (the two widest widths "
                                       "where fewer lie there): the narrow end cannot carry them"),
}


def thresholds_block(params: dict) -> dict:
    """The claim JSON's ``thresholds``: {parameter: {value, kind, source}} for the claim's parameters listed here."""
    return {k: {"value": v, "kind": SOURCES[k][0], "source": SOURCES[k][1]} for k, v in sorted(params.items())
            if k in SOURCES}


def source(name: str) -> str:
    """A criterion's ``source`` string for parameter ``name``: "<kind>: <reason>"."""
    kind, why = SOURCES[name]
    return f"{kind}: {why}"
