"""A criterion: one part of a claim's verdict, an estimate on one side of a threshold, and the three verdicts."""
from __future__ import annotations

from dataclasses import dataclass

from lmcflow.claims import margins, stats

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not_supported", "inconclusive"


@dataclass(frozen=True)
class Criterion:
    """One part of a verdict: the claim says ``estimate <side> threshold``."""

    name: str
    description: str
    estimate: stats.Estimate
    # ">", "<", "within" (|estimate| < threshold), "apart" (|estimate| > threshold) or, for a one-sided null
    # control, "ahead>" / "ahead<" (the estimate beyond the threshold in that direction: supported, else inconclusive)
    side: str
    threshold: float
    source: str  # where the threshold comes from: the paper, a null, or a stated convention
    kind: str = "part"  # "part", "trend" (over the whole grid) or "control" (against a same-run null)
    control: str = ""  # the null or control this criterion compares with

    @property
    def verdict(self) -> str:
        """supported: the whole CI on the claim's side of the threshold; not_supported: wholly on the other
        side (or touching it from there); else, and without a CI, inconclusive. "apart" (a null-partner control)
        is supported or inconclusive, never not_supported: a statistic that cannot tell a real partner from a
        useless one says that the data cannot decide, not that the claim is false."""
        e = self.estimate
        if not e.has_ci():
            return INCONCLUSIVE
        above = e.ci_low > self.threshold
        below = e.ci_high < self.threshold
        if self.side == "ahead>":
            return SUPPORTED if above else INCONCLUSIVE
        if self.side == "ahead<":
            return SUPPORTED if below else INCONCLUSIVE
        if self.side == "apart":
            return SUPPORTED if e.ci_low > self.threshold or e.ci_high < -self.threshold else INCONCLUSIVE
        if self.side == "within":
            inside = -self.threshold < e.ci_low and e.ci_high < self.threshold
            outside = e.ci_low >= self.threshold or e.ci_high <= -self.threshold
            return SUPPORTED if inside else NOT_SUPPORTED if outside else INCONCLUSIVE
        if self.side == ">":
            return SUPPORTED if above else NOT_SUPPORTED if e.ci_high <= self.threshold else INCONCLUSIVE
        return SUPPORTED if below else NOT_SUPPORTED if e.ci_low >= self.threshold else INCONCLUSIVE

    def as_dict(self) -> dict:
        return {"name": self.name, "description": self.description, **self.estimate.as_dict(),
                "side": self.side, "threshold": self.threshold, "source": self.source, "kind": self.kind,
                "control": self.control, "verdict": self.verdict, **(margins.convention_margin(self) or {})}
