import math

import numpy as np
import pytest
import torch

from lmcflow.metrics import barriers, fit_inverse_temperature, relative_accuracy_barrier


def test_barriers_on_hand_made_curve():
    lam = [0, 0.25, 0.5, 0.75, 1]
    loss = [1.0, 2.0, 1.5, 3.0, 2.0]
    b = barriers(lam, loss)
    # midpoint: 1.5 - (1+2)/2 = 0
    assert b["midpoint"] == pytest.approx(0.0)
    # max - mean: 3.0 - 1.5
    assert b["max_minus_mean"] == pytest.approx(1.5)
    # entezari: max over λ of L(λ) - ((1-λ)·1 + λ·2): at 0.75: 3 - 1.75 = 1.25; at .25: 2 - 1.25 = .75
    assert b["entezari"] == pytest.approx(1.25)


def test_barriers_flat_and_linear_are_zero():
    lam = np.linspace(0, 1, 11)
    for curve in (np.full(11, 0.3), 0.2 + 0.5 * lam):
        b = barriers(lam, curve)
        assert b["entezari"] == pytest.approx(0.0, abs=1e-12)
        assert b["midpoint"] == pytest.approx(0.0, abs=1e-12)
    # A linear curve still has a max-minus-mean barrier: max endpoint minus their mean.
    assert barriers(lam, 0.2 + 0.5 * lam)["max_minus_mean"] == pytest.approx(0.25)


def test_barriers_order_independent_and_grid_checked():
    assert barriers([1, 0, 0.5], [2, 1, 3]) == barriers([0, 0.5, 1], [1, 3, 2])
    with pytest.raises(ValueError, match="0.5"):
        barriers([0, 0.4, 1], [1, 2, 1])
    with pytest.raises(ValueError, match="0 and 1"):
        barriers([0.1, 0.5, 1], [1, 2, 1])


def test_relative_accuracy_barrier():
    assert relative_accuracy_barrier([0, 0.5, 1], [0.9, 0.45, 0.8]) == pytest.approx(-0.5)
    assert relative_accuracy_barrier([0, 0.5, 1], [0.9, 0.95, 0.9]) == pytest.approx(0.0)


@pytest.mark.parametrize("beta_true", [0.3, 1.0, 4.0])
def test_temperature_fit_recovers_known_temperature(beta_true):
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(20000, 10, generator=g) * 2
    y = torch.multinomial(torch.softmax(beta_true * logits, dim=1), 1, generator=g).squeeze(1)
    beta = fit_inverse_temperature(logits, y)
    assert beta == pytest.approx(beta_true, rel=0.05)


def test_temperature_fit_is_optimal():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(500, 5, generator=g)
    y = torch.multinomial(torch.softmax(0.7 * logits, 1), 1, generator=g).squeeze(1)
    beta = fit_inverse_temperature(logits, y)
    ce = lambda b: torch.nn.functional.cross_entropy(logits.double() * b, y).item()  # noqa: E731
    assert ce(beta) <= ce(beta * 1.05) and ce(beta) <= ce(beta / 1.05)
    assert math.isfinite(beta) and beta > 0


def test_temperature_fit_minimises_the_cross_entropy_itself():
    """The fit evaluates CE through logsumexp; it finds the β of a search on F.cross_entropy."""
    import math

    import torch.nn.functional as F
    from scipy.optimize import minimize_scalar

    def reference_fit(z, y):
        res = minimize_scalar(lambda t: F.cross_entropy(z * math.exp(t), y).item(), bounds=(-7.0, 7.0),
                              method="bounded", options={"xatol": 1e-7})
        return math.exp(res.x)

    g = torch.Generator().manual_seed(3)
    for beta_true in (0.3, 2.0):
        logits = torch.randn(3000, 10, generator=g) * 3
        y = torch.multinomial(torch.softmax(beta_true * logits, 1), 1, generator=g).squeeze(1)
        assert fit_inverse_temperature(logits, y) == pytest.approx(reference_fit(logits.double(), y), rel=1e-6)
