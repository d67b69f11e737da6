"""Paper claims as verdicts computed from the result tables.

``core``: the registry, criteria, verdict logic and the claim JSON; ``stats``: seed-level inference
(delete-one-seed jackknife); ``identifiability``, ``identifiability_data``, ``width_merging``, ``width_mechanism``,
``width_logits`` and ``width_extensions`` (beyond both papers): the claims, each a declarative ``@claim`` entry plus
its statistic (``width``: what the width paper's claims share; ``reference``: the width mechanism claims' same-run
random-feature reference).
Importing the package registers every claim; their criteria: docs/claims.md.
"""
from lmcflow.claims import (  # noqa: F401  (registers the claims)
    identifiability,
    identifiability_data,
    width_extensions,
    width_logits,
    width_mechanism,
    width_merging,
)
from lmcflow.claims.core import (
    INCONCLUSIVE,
    NOT_SUPPORTED,
    REGISTRY,
    SUPPORTED,
    Claim,
    Criterion,
    Outcome,
    PaperValue,
    claim_row,
    claim_studies,
    combine,
    evaluate_claim,
)
from lmcflow.claims.width_extensions import READS_REPAIRED

__all__ = [
    "INCONCLUSIVE",
    "NOT_SUPPORTED",
    "REGISTRY",
    "SUPPORTED",
    "Claim",
    "Criterion",
    "Outcome",
    "PaperValue",
    "READS_REPAIRED",
    "claim_row",
    "claim_studies",
    "combine",
    "evaluate_claim",
]
