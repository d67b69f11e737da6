"""The regime of a width claim (the paper's scale beside ours) and the predicted crossing width of the barrier's
power-law decay (lmcflow.claims.regime)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from lmcflow.claims import claim_row, evaluate_claim
from lmcflow.claims.regime import (
    BELOW_REGIME,
    crossing_width,
    decay_fit,
    qualified_verdict,
    regime_block,
)
from lmcflow.claims.width import PAPER
from lmcflow.cli import claims_markdown, format_claim
from tests.claim_tables import SEEDS, table, working_runs

GRID = (0.0625, 0.125, 0.25, 0.5, 1.0)


def test_decay_fit_recovers_a_known_power_law():
    widths = np.array(GRID)
    a, beta = decay_fit(widths, 0.1 * widths ** -0.5)
    assert beta == pytest.approx(-0.5, abs=1e-12) and math.exp(a) == pytest.approx(0.1, rel=1e-12)
    # 0.1 w^-0.5 = 0.02  <=>  w = 5^2
    assert crossing_width(widths, 0.1 * widths ** -0.5, 0.02) == pytest.approx(25.0, rel=1e-9)
    assert math.isnan(crossing_width(widths, 0.01 * widths ** 0.3, 0.02))  # rising: never meets it from above
    assert math.isnan(decay_fit(widths, [0.1, 0.05, 0.0, 0.01, 0.02])[1])  # a zero barrier: no power law


def barrier_tables(beta: float, c: float = 0.03, seed_sd: float = 0.08, pair_sd: float = 0.03,
                   widths=GRID) -> dict:
    """Midpoint error barriers c·w^β with a multiplicative effect per seed and noise per pair."""
    rng = np.random.default_rng(3)
    u = rng.normal(0, seed_sd, len(SEEDS))
    rows, path = [], []
    for (a, b), w in itertools.product(itertools.combinations(SEEDS, 2), widths):
        v = c * w ** beta * math.exp(u[a] + u[b] + rng.normal(0, pair_sd))
        for definition in ("midpoint", "entezari", "max_minus_mean"):
            rows.append({"seed_a": a, "seed_b": b, "width": w, "definition": definition, "metric": "error",
                         "value": v, "point": f"w{w:g}"})
        # the same midpoint on the merge's path, both endpoints at 12% error
        path += [{"seed_a": a, "seed_b": b, "width": w, "lam": lam, "error": 0.12 + (v if lam == 0.5 else 0.0),
                  "point": f"w{w:g}"} for lam in (0.0, 0.5, 1.0)]
    tables = {"barriers": table("barriers", rows), "interpolation": table("interpolation", path)}
    return {**tables, "runs": working_runs(tables)}


def scale(widths, arch="mlp") -> dict:
    return {"arch": [arch], "widths": list(widths), "dataset": ["fashion_mnist"]}


@pytest.mark.parametrize("beta", [-0.75, -0.4])
def test_predicted_crossing_width_covers_the_truth(beta):
    result = evaluate_claim("width-merge-accuracy", {"study": "s"}, barrier_tables(beta), scale(GRID))
    crossing = result["details"]["crossing"]
    truth = (0.02 / 0.03) ** (1 / beta)  # c·w^β = 0.02
    assert crossing["exponent"]["ci_low"] < beta < crossing["exponent"]["ci_high"]
    low, high = crossing["width_ci"]
    assert low < truth < high and crossing["width"] == pytest.approx(truth, rel=0.3)
    assert crossing["beyond_grid"] is True and crossing["threshold"] == 0.02
    assert result["regime"]["predicted_crossing_width"] == crossing["width"]


def test_a_barrier_that_does_not_decay_predicts_no_crossing():
    result = evaluate_claim("width-merge-accuracy", {"study": "s"}, barrier_tables(0.2), scale(GRID))
    assert result["details"]["crossing"]["width"] is None and result["details"]["crossing"]["width_ci"] is None
    assert result["verdict"] == "not_supported"


def test_a_nearly_flat_decay_predicts_no_crossing_instead_of_overflowing():
    """A useless partner's barrier barely falls with width: the fitted crossing lies at 2 ** 10⁴ units and more,
    beyond a float, for some leave-one-seed-out fits; the claim still decides, with no crossing width given."""
    result = evaluate_claim("width-merge-accuracy", {"study": "s"}, barrier_tables(-0.0005, c=0.3, seed_sd=0.02),
                            scale(GRID))
    crossing = result["details"]["crossing"]
    assert crossing["log2_width"]["statistic"] > 1000 and crossing["width"] is None and crossing["width_ci"] is None
    assert result["verdict"] == "not_supported"


def test_below_the_regime_a_not_supported_verdict_is_qualified_and_shown_so(tmp_path):
    result = evaluate_claim("width-merge-accuracy", {"study": "s"}, barrier_tables(-0.4), scale(GRID))
    assert result["verdict"] == "not_supported"  # 3% at the narrowest, ~1.1× lower at ×1: above 2%
    reg = result["regime"]
    assert reg["reached"] is False and reg["paper_width"] == 16.0 and reg["our_widest"] == 1.0
    assert reg["label"] == "not reached at ×1; the paper: ×16"
    assert reg["verdict_qualifier"] == BELOW_REGIME
    assert qualified_verdict(result) == "not_supported (below the paper's regime: not reached at ×1; the paper: ×16)"
    row = claim_row(result)
    assert row["verdict_qualifier"] == BELOW_REGIME and row["paper_width"] == 16.0
    assert row["crossing_width_ci_low"] < row["crossing_width"] < row["crossing_width_ci_high"]
    assert "below the paper's regime" in format_claim(row) and "predicted crossing width ×" in format_claim(row)
    (tmp_path / "claims").mkdir()
    import json
    (tmp_path / "claims" / "width-merge-accuracy.json").write_text(json.dumps(result))
    assert "not_supported (below the paper's regime: not reached at ×1; the paper: ×16)" in claims_markdown(tmp_path)


def test_in_the_regime_a_not_supported_verdict_counts():
    widths = (1.0, 2.0, 4.0, 8.0, 16.0)
    result = evaluate_claim("width-merge-accuracy", {"study": "s"}, barrier_tables(0.2, widths=widths),
                            scale(widths))
    reg = result["regime"]
    assert result["verdict"] == "not_supported" and reg["reached"] is True and reg["verdict_qualifier"] == ""
    assert reg["label"] == "reached at ×16 (the paper: ×16)" and qualified_verdict(result) == "not_supported"


def test_the_paper_width_follows_the_architecture_and_other_papers_have_none():
    assert regime_block(PAPER, scale(GRID, "resnet20"), "not_supported", {})["paper_width"] == 32.0
    assert regime_block(PAPER, scale([0.0625]), "supported", {})["label"] == "not reached at ×1/16; the paper: ×16"
    assert regime_block("Bürgin et al., ICML 2026", scale(GRID), "not_supported", {}) is None
    assert regime_block(PAPER, {}, "not_supported", {}) is None
