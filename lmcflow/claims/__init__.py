"""Paper claims as verdicts computed from the result tables.

``core``: the registry, criteria, verdict logic and the claim JSON; ``stats``: seed-level inference
(delete-one-seed jackknife); ``width`` and ``identifiability``: one module per paper, each claim a
declarative ``@claim`` entry plus its statistic. Importing the package registers every claim.
"""
from lmcflow.claims import identifiability, width  # noqa: F401  (registers the claims)
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

__all__ = [
    "INCONCLUSIVE",
    "NOT_SUPPORTED",
    "REGISTRY",
    "SUPPORTED",
    "Claim",
    "Criterion",
    "Outcome",
    "PaperValue",
    "claim_row",
    "claim_studies",
    "combine",
    "evaluate_claim",
]
