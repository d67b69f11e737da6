"""A collapsed null partner is its model scaled toward zero: every weight, the fixed offset F of a symmetry-breaking
layer included (W_eff = D⊙W + F becomes s·W_eff), the 0/1 mask D and the gate matrix kept (docs/claims.md, "Null
partners")."""
import copy

import pytest
import torch

from lmcflow.alignment.dense import aligned_pair
from lmcflow.config.partners import collapse
from lmcflow.config.points import Point
from lmcflow.merging import interpolate_state
from lmcflow.models import ModelSpec, build_model

SCALE = 0.1


def point(partner: str, sym: dict | None, norm: str = "layernorm") -> Point:
    return Point(study="s", point="p", dataset="d", seeds=[3000], train={},
                 model={"arch": "mlp", "depth": 2, "base_width": 8, "norm": norm,
                        "symmetry": sym or {"kind": "standard"}},
                 merge={}, analysis={"null_partners": {"kinds": [], "at": {}, "collapse_scale": SCALE}},
                 swept={}, partner=partner)


def model_of(p: Point) -> torch.nn.Module:
    torch.manual_seed(0)
    m = build_model(ModelSpec(arch="mlp", in_shape=(6,), num_classes=3, depth=2, base_width=8, norm=p.model["norm"],
                              activation="gelu", symmetry=p.model["symmetry"]))
    with torch.no_grad():  # trained-looking: nonzero everywhere the model has parameters
        for t in m.parameters():
            t.add_(0.3 * torch.randn_like(t))
    return m


SYMMETRIES = [{"kind": "w_asymmetric", "sigma_f": 1.0, "n_fixed": 0.5},
              {"kind": "w_asymmetric", "sigma_f": 0.0, "mask_type": "bernoulli", "mask_density": 0.3},
              {"kind": "syre", "sigma_f": 1.0},
              {"kind": "sigma_asymmetric", "sigma_f": 0.0}]


@pytest.mark.parametrize("sym", SYMMETRIES, ids=[s["kind"] for s in SYMMETRIES])
def test_collapse_scales_the_effective_weights_and_keeps_the_structure(sym):
    p = point("collapsed", sym)
    model = model_of(p)
    before = copy.deepcopy(model)
    collapse(model, p)
    x = torch.randn(4, 6)
    for (name, m), m0 in zip(model.named_modules(), before.modules()):
        if hasattr(m, "effective_weight"):
            assert torch.allclose(m.effective_weight(), SCALE * m0.effective_weight()), name
            assert torch.equal(m.mask, m0.mask) and set(m.mask.unique().tolist()) <= {0.0, 1.0}, name
        if hasattr(m, "C"):  # the σ-asymmetric gate: a fixed nonlinearity, kept
            assert torch.equal(m.C, m0.C), name
    for name, t in model.named_parameters():
        assert torch.allclose(t, SCALE * dict(before.named_parameters())[name]), name
    assert not torch.allclose(model(x), before(x))


def test_the_merge_with_a_collapsed_partner_is_a_plus_almost_nothing():
    """On the merge path (dense form, as merging and matching read these models) B's W_eff is s·W_eff: the midpoint's
    effective weight is (W_eff,A + s·W_eff,B)/2, whose mask is still the 0/1 one."""
    p = point("collapsed", SYMMETRIES[0])
    a, b = model_of(p), model_of(p)
    w_b = [m.effective_weight().detach().clone() for m in b.modules() if hasattr(m, "effective_weight")]
    collapse(b, p)
    da, db, dense = aligned_pair(a, b, None)
    assert dense
    mid = interpolate_state(da.state_dict(), db.state_dict(), 0.5)
    w_a = [m.effective_weight().detach() for m in a.modules() if hasattr(m, "effective_weight")]
    names = [n for n, m in a.named_modules() if hasattr(m, "effective_weight")]
    for n, wa, wb in zip(names, w_a, w_b):
        assert torch.allclose(mid[f"{n}.weight"], (wa + SCALE * wb) / 2, atol=1e-6), n
        assert torch.equal(mid[f"{n}.mask"], torch.ones_like(wa)) and not mid[f"{n}.offset"].any(), n


def test_collapse_scales_every_buffer_of_a_standard_model_and_spares_other_kinds():
    """A standard model (the width study's): every float parameter and buffer, BatchNorm's running statistics
    included, times s; the other kinds are left as trained."""
    p = point("collapsed", None, norm="batchnorm")
    model = model_of(p)
    model.train()
    model(torch.randn(16, 6))  # running statistics that are not their initial values
    before = copy.deepcopy(model.state_dict())
    collapse(model, p)
    for k, t in model.state_dict().items():
        want = SCALE * before[k] if t.is_floating_point() else before[k]
        assert torch.allclose(t, want), k
    for kind in ("real", "untrained", "shuffled_labels"):
        m = model_of(point(kind, SYMMETRIES[0]))
        sd = copy.deepcopy(m.state_dict())
        collapse(m, point(kind, SYMMETRIES[0]))
        assert all(torch.equal(t, sd[k]) for k, t in m.state_dict().items()), kind
