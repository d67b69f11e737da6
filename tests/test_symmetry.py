"""Symmetry-breaking layers: fixed entries stay fixed, masks are process-independent,
W-asymmetric networks lose the permutation symmetry that standard ones have."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from lmcflow.io import load_tensors, save_tensors
from lmcflow.merging import interpolate_state
from lmcflow.models import ModelSpec, build_model
from lmcflow.symmetry import (
    AsymConv2d,
    AsymLinear,
    check_symmetry,
    effective_state_dict,
    effective_weight,
    fixed_entry_count,
    make_conv2d,
    make_gate,
    make_linear,
    resolve_n_fixed,
)

W_ASYM = {"kind": "w_asymmetric", "sigma_f": 1.0, "mask_seed": 7, "n_fixed": [5, 6, 4], "sigma_f_scale": [1, 0.5, 0.25]}


def mlp(sym, d_in=12, width=16, depth=2, classes=3, norm="layernorm", act="gelu"):
    spec = ModelSpec("mlp", (d_in,), classes, base_width=width, depth=depth, norm=norm, activation=act,
                     symmetry=sym)
    return build_model(spec)


# --------------------------------------------------------------------------- structure
def test_each_row_has_exactly_n_fixed_fixed_entries_and_offsets_only_there():
    lin = make_linear(30, 20, True, W_ASYM, 1)
    assert isinstance(lin, AsymLinear) and lin.mask.shape == lin.weight.shape == lin.offset.shape
    assert torch.equal((lin.mask == 0).sum(1), torch.full((20,), 6))
    assert torch.all(lin.offset[lin.mask == 1] == 0)
    assert torch.all(lin.offset[lin.mask == 0] != 0)
    assert torch.all(lin.weight[lin.mask == 0] == 0)
    # σ_F · s_l scaling: layer 1 has s = 0.5; the same draw with σ_F = 2 doubles it
    lin2 = make_linear(30, 20, True, {**W_ASYM, "sigma_f": 2.0}, 1)
    assert torch.equal(lin.mask, lin2.mask)
    torch.testing.assert_close(lin2.offset, 2 * lin.offset)


def test_conv_rows_are_output_channels_over_in_k_k():
    conv = make_conv2d(4, 8, 3, 1, 1, False, {**W_ASYM, "n_fixed": 10}, 0)
    assert isinstance(conv, AsymConv2d) and conv.mask.shape == (8, 4, 3, 3)
    assert torch.equal((conv.mask == 0).reshape(8, -1).sum(1), torch.full((8,), 10))
    x = torch.randn(2, 4, 6, 6)
    ref = nn.functional.conv2d(x, effective_weight(conv), None, padding=1)
    torch.testing.assert_close(conv(x), ref)


def test_n_fixed_clipping_and_fractions():
    assert resolve_n_fixed(64, 512) == 64
    assert resolve_n_fixed(64, 32) == 31  # clipped: one trainable entry left per row
    assert resolve_n_fixed(0.125, 512) == 64 and resolve_n_fixed(0.125, 32) == 4
    lin = make_linear(8, 5, True, {**W_ASYM, "n_fixed": 64}, 0)
    assert torch.equal((lin.mask == 0).sum(1), torch.full((5,), 7))


@pytest.mark.parametrize("bad,key", [
    ({"kind": "w_asym"}, "kind"),
    ({"kind": "w_asymmetric", "sigma_f": -1}, "sigma_f"),
    ({"kind": "w_asymmetric", "n_fixed": -3}, "n_fixed"),
    ({"kind": "w_asymmetric", "n_fixed": 1.5}, "n_fixed"),
    ({"kind": "w_asymmetric", "mask_seed": "a"}, "mask_seed"),
    ({"kind": "w_asymmetric", "sigma_f_scale": [1, "x"]}, "sigma_f_scale"),
    ({"kind": "w_asymmetric", "mask_type": "dense"}, "mask_type"),
    ({"kind": "w_asymmetric", "mask_density": 0}, "mask_density"),
    ({"kind": "w_asymmetric", "sigmaf": 1}, "sigmaf"),
])
def test_bad_config_values_name_the_key(bad, key):
    with pytest.raises(ValueError, match=rf"model\.symmetry\.{key}"):
        check_symmetry(bad)


def test_per_layer_list_too_short_names_the_key():
    with pytest.raises(ValueError, match=r"model\.symmetry\.n_fixed.*layer index 3"):
        mlp({**W_ASYM, "n_fixed": [5, 6, 4], "sigma_f_scale": 1.0}, depth=3)


def test_bernoulli_mask_density_and_zero_offsets():
    lin = make_linear(200, 100, True, {"kind": "w_asymmetric", "sigma_f": 0.0, "mask_type": "bernoulli",
                                       "mask_density": 0.15, "mask_seed": 1}, 0)
    assert abs(lin.mask.mean().item() - 0.15) < 0.01
    assert torch.all(lin.offset == 0)


def test_syre_dense_offsets_and_sigma_gate():
    lin = make_linear(10, 6, True, {"kind": "syre", "sigma_f": 0.5, "mask_seed": 2}, 0)
    assert torch.all(lin.mask == 1) and torch.all(lin.offset != 0)
    torch.testing.assert_close(effective_weight(lin), lin.weight + lin.offset)
    gate = make_gate(6, {"kind": "sigma_asymmetric", "mask_seed": 2}, 0)
    x = torch.randn(3, 6)
    torch.testing.assert_close(gate(x), torch.sigmoid(x @ gate.C.T) * x)
    x4 = torch.randn(2, 6, 3, 3)
    torch.testing.assert_close(gate(x4)[:, :, 1, 2], gate(x4[:, :, 1, 2]))
    assert isinstance(make_gate(6, W_ASYM, 0), nn.Identity)
    assert isinstance(make_linear(10, 6, True, {"kind": "sigma_asymmetric"}, 0), nn.Linear)


def test_standard_effective_weight_is_weight_and_no_fixed_entries():
    m = mlp(None)
    assert effective_weight(m.layers[0]) is m.layers[0].weight
    assert fixed_entry_count(m) == 0
    assert fixed_entry_count(mlp(W_ASYM)) == 16 * 5 + 16 * 6 + 3 * 4


# --------------------------------------------------------------------------- training never moves fixed entries
@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_optimizer_steps_never_change_fixed_entries(opt_name):
    torch.manual_seed(0)
    model = nn.Sequential(make_linear(12, 16, True, W_ASYM, 0), nn.GELU(), make_linear(16, 3, True, W_ASYM, 2))
    conv = make_conv2d(3, 5, 3, 1, 1, True, {**W_ASYM, "n_fixed": 9}, 1)
    params = list(model.parameters()) + list(conv.parameters())
    if opt_name == "sgd":
        opt = torch.optim.SGD(params, lr=0.5, momentum=0.9, nesterov=True, weight_decay=0.1)
    else:
        opt = torch.optim.AdamW(params, lr=0.1, weight_decay=0.5)
    layers = [model[0], model[2], conv]
    before = [(effective_weight(m).detach().clone(), m.weight.detach().clone()) for m in layers]
    for _ in range(5):
        loss = model(torch.randn(32, 12)).pow(2).mean() + conv(torch.randn(4, 3, 6, 6)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for m in layers:
            assert torch.all(m.weight.grad[m.mask == 0] == 0)
        opt.step()
    for m, (w_eff0, w0) in zip(layers, before):
        fixed = m.mask == 0
        w_eff = effective_weight(m).detach()
        assert torch.equal(w_eff[fixed], w_eff0[fixed]), "a fixed entry of W_eff moved"
        assert torch.equal(m.weight.detach()[fixed], torch.zeros_like(w0[fixed])), "trainable W moved at a fixed slot"
        assert not torch.allclose(w_eff[~fixed], w_eff0[~fixed]), "trainable entries should have moved"


def test_training_loop_keeps_fixed_entries():
    from lmcflow.data import Dataset
    from lmcflow.training import train

    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 12, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    data = Dataset({"train": x, "val": x[:32], "test": x[:32]}, {"train": y, "val": y[:32], "test": y[:32]},
                   {"in_shape": [12], "num_classes": 3, "task": "classification"})
    model = mlp(W_ASYM)
    offsets = {n: b.clone() for n, b in model.named_buffers() if n.endswith("offset")}
    cfg = {"optimizer": "sgd", "lr": 0.2, "momentum": 0.9, "weight_decay": 5e-3, "epochs": 2, "batch_size": 64,
           "schedule": "cosine", "warmup_epochs": 0, "augment": "none", "precision": "fp32"}
    train(model, data, cfg, seed=0, device=torch.device("cpu"))
    for name, mod in model.named_modules():
        if isinstance(mod, AsymLinear):
            fixed = mod.mask == 0
            assert torch.equal(effective_weight(mod).detach()[fixed], offsets[f"{name}.offset"][fixed])


# --------------------------------------------------------------------------- determinism across processes
_DIGEST_SCRIPT = r"""
import sys
from tests.test_symmetry import mask_digest
print(" ".join(mask_digest(int(s)) for s in sys.argv[1:]))
"""


def mask_digest(seed: int) -> str:
    sym = {"kind": "w_asymmetric", "sigma_f": 1.0, "mask_seed": seed, "n_fixed": [5, 6, 4],
           "sigma_f_scale": [1, 0.5, 0.25]}
    lin = make_linear(30, 20, True, sym, 1)
    conv = make_conv2d(4, 8, 3, 1, 1, False, {**sym, "n_fixed": 10}, 0)
    syre = make_linear(9, 5, True, {"kind": "syre", "mask_seed": seed}, 3)
    gate = make_gate(7, {"kind": "sigma_asymmetric", "mask_seed": seed}, 2)
    h = hashlib.sha256()
    for t in (lin.mask, lin.offset, conv.mask, conv.offset, syre.offset, gate.C):
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def test_same_mask_seed_gives_identical_masks_in_separate_processes():
    torch.manual_seed(123)  # the global RNG must play no role
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # Python's hash() salt differs from this process
    out = subprocess.run([sys.executable, "-c", _DIGEST_SCRIPT, "7", "8"], capture_output=True, text=True,
                         check=True, env=env, cwd=Path(__file__).resolve().parents[1]).stdout.split()
    assert out[0] == mask_digest(7)
    assert out[1] == mask_digest(8) != out[0]


def test_two_models_of_a_point_share_masks_but_not_trainable_init():
    torch.manual_seed(0)
    a = mlp(W_ASYM)
    torch.manual_seed(1)
    b = mlp(W_ASYM)
    for (n, ba), bb in zip(a.named_buffers(), b.buffers()):
        assert torch.equal(ba, bb), n
    assert not torch.equal(a.layers[0].weight, b.layers[0].weight)


def test_buffers_go_into_safetensors_checkpoints(tmp_path):
    m = mlp(W_ASYM)
    save_tensors(tmp_path / "m.safetensors", m.state_dict())
    tensors, _ = load_tensors(tmp_path / "m.safetensors")
    for key in ("layers.0.mask", "layers.0.offset", "head.mask", "head.offset"):
        assert key in tensors
    fresh = mlp({**W_ASYM, "mask_seed": 99})
    fresh.load_state_dict(tensors)
    x = torch.randn(5, 12)
    torch.testing.assert_close(fresh(x), m.eval()(x))


# --------------------------------------------------------------------------- permutation symmetry
def _permute_hidden(model, sym, perm, with_buffers: bool):
    """Permute hidden units of layer 0 by hand (rows of layer 0, LayerNorm, columns of layer 1)."""
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    rows = ["layers.0.weight", "layers.0.bias", "norms.0.weight", "norms.0.bias"]
    cols = ["layers.1.weight"]
    if with_buffers:
        rows += ["layers.0.mask", "layers.0.offset"]
        cols += ["layers.1.mask", "layers.1.offset"]
    for k in rows:
        sd[k] = sd[k][perm]
    for k in cols:
        sd[k] = sd[k][:, perm]
    out = mlp(sym)
    out.load_state_dict(sd)
    return out.eval()


@pytest.mark.parametrize("kind", ["standard", "w_asymmetric", "sigma_asymmetric"])
def test_permuted_copy_is_equivalent_only_for_standard(kind):
    sym = {"standard": None, "w_asymmetric": W_ASYM, "sigma_asymmetric": {"kind": "sigma_asymmetric"}}[kind]
    torch.manual_seed(0)
    model = mlp(sym).eval()
    x = torch.randn(64, 12)
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    permuted = _permute_hidden(model, sym, perm, with_buffers=False)
    gap = (permuted(x) - model(x)).abs().max().item()
    if kind == "standard":
        assert gap < 1e-5
    else:
        assert gap > 1e-2, f"{kind}: permuting hidden units should change the function (gap {gap})"


def test_w_asymmetric_permutation_with_buffers_is_equivalent():
    """The masks and offsets are the only symmetry breakers: permuting them too restores equivalence."""
    torch.manual_seed(0)
    model = mlp(W_ASYM).eval()
    perm = torch.randperm(16, generator=torch.Generator().manual_seed(3))
    permuted = _permute_hidden(model, W_ASYM, perm, with_buffers=True)
    x = torch.randn(64, 12)
    torch.testing.assert_close(permuted(x), model(x), atol=1e-5, rtol=1e-5)


def test_interpolation_acts_on_effective_weights():
    torch.manual_seed(0)
    a, b = mlp(W_ASYM), mlp(W_ASYM)
    mid = mlp(W_ASYM)
    mid.load_state_dict(interpolate_state(a.state_dict(), b.state_dict(), 0.3))
    for la, lb, lm in zip(a.layers, b.layers, mid.layers):
        torch.testing.assert_close(effective_weight(lm), torch.lerp(effective_weight(la), effective_weight(lb), 0.3))


def test_effective_state_dict_is_function_preserving():
    torch.manual_seed(0)
    m = mlp(W_ASYM).eval()
    dense = mlp(W_ASYM).eval()
    dense.load_state_dict(effective_state_dict(m))
    assert torch.all(dense.layers[0].mask == 1)
    x = torch.randn(8, 12)
    torch.testing.assert_close(dense(x), m(x))


@pytest.mark.parametrize("arch,shape", [("vgg11", (3, 16, 16)), ("resnet20", (3, 16, 16))])
def test_conv_models_build_with_w_asymmetric_layers(arch, shape):
    sym = {"kind": "w_asymmetric", "sigma_f": 1.0, "mask_seed": 0, "n_fixed": 0.1}
    spec = ModelSpec(arch, shape, 10, width=0.25, norm="groupnorm", symmetry=sym)
    m = build_model(spec).eval()
    n_asym = sum(isinstance(mod, (AsymConv2d, AsymLinear)) for mod in m.modules())
    n_all = sum(isinstance(mod, (nn.Conv2d, nn.Linear)) for mod in m.modules())
    assert n_asym == n_all > 0
    assert m(torch.randn(2, *shape)).shape == (2, 10)


def test_sum_relu_model():
    sym = {"kind": "w_asymmetric", "sigma_f": 0.0, "mask_type": "bernoulli", "mask_density": 0.15, "mask_seed": 0}
    m = build_model(ModelSpec("sum_relu", (20,), 1, base_width=128, symmetry=sym)).eval()
    x = torch.randn(7, 20)
    h = m.hidden_features(x)[0]
    assert h.shape == (7, 128) and torch.all(h >= 0)
    torch.testing.assert_close(m(x), h.sum(1, keepdim=True))
    torch.testing.assert_close(effective_weight(m.layers[0]), m.layers[0].mask * m.layers[0].weight)
    with pytest.raises(ValueError, match="scalar output"):
        build_model(ModelSpec("sum_relu", (20,), 10))


def test_bf16_autocast_forward_runs():
    m = mlp(W_ASYM)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = m(torch.randn(4, 12))
    assert out.shape == (4, 3) and torch.isfinite(out.float()).all()


# --------------------------------------------------------------------------- initialisation and the σ-gate
def test_paper_init_of_w_asymmetric_linear_layers():
    """``model.init.weights: paper``: trainable weights of W-asymmetric / SyRe linear layers ~ N(0, 1/fan_in) (the
    authors'); ``torch`` keeps nn.Linear's U(±1/√fan_in) (std √3 smaller); standard layers are torch's in both."""
    def build(init, sym=W_ASYM, width=256):
        torch.manual_seed(0)
        spec = ModelSpec("mlp", (784,), 10, base_width=width, depth=1, symmetry=sym, init=init)
        return build_model(spec)

    paper, torch_init = build({"weights": "paper"}), build({"weights": "torch"})
    w = paper.layers[0].weight[paper.layers[0].mask.bool()]
    assert w.std().item() == pytest.approx(1 / 784 ** 0.5, rel=0.03)
    assert torch_init.layers[0].weight[torch_init.layers[0].mask.bool()].std().item() == pytest.approx(
        1 / (3 * 784) ** 0.5, rel=0.03)
    assert (paper.layers[0].weight[~paper.layers[0].mask.bool()] == 0).all()  # fixed positions stay zero
    std_paper, std_torch = build({"weights": "paper"}, None), build({"weights": "torch"}, None)
    assert torch.equal(std_paper.layers[0].weight, std_torch.layers[0].weight)
    syre = build({"weights": "paper"}, {"kind": "syre", "sigma_f": 1.0})
    assert syre.layers[0].weight.std().item() == pytest.approx(1 / 784 ** 0.5, rel=0.03)


def test_normal_init_with_zero_biases():
    """The authors' coherence networks: N(0, 0.05²) weights, zero biases."""
    torch.manual_seed(0)
    spec = ModelSpec("mlp", (20,), 3, base_width=400, depth=1, init={"weights": "normal", "std": 0.05,
                                                                      "bias": "zero"})
    m = build_model(spec)
    assert m.layers[0].weight.std().item() == pytest.approx(0.05, rel=0.05)
    assert (m.layers[0].bias == 0).all() and (m.head.bias == 0).all()
    with pytest.raises(ValueError, match="model.init.weights"):
        build_model(ModelSpec("mlp", (20,), 3, init={"weights": "xavier"}))


def test_sigma_gate_is_the_nonlinearity_and_its_permutation_spec_keeps_the_function():
    """σ-asymmetric MLP (Lim et al.; the authors' σ-MLP): h = sigmoid(C z)⊙z after the norm, no other activation.
    Permuting C on both axes with the hidden units keeps the function (the spec's (g, g) axes)."""
    from lmcflow.alignment import apply_permutation, permutation_spec

    sym = {"kind": "sigma_asymmetric", "mask_seed": 3}
    torch.manual_seed(0)
    model = mlp(sym).eval()
    x = torch.randn(32, 12)
    z = model.norms[0](model.layers[0](x))
    torch.testing.assert_close(model.hidden_features(x)[0], torch.sigmoid(z @ model.gates[0].C.T) * z)
    spec = permutation_spec(model)
    assert spec.axes["gates.0.C"] == ("hidden0", "hidden0")
    perms = {g: torch.randperm(n, generator=torch.Generator().manual_seed(1)) for g, n in spec.sizes.items()}
    permuted = mlp(sym).eval()
    permuted.load_state_dict(apply_permutation(spec, model.state_dict(), perms))
    torch.testing.assert_close(permuted(x), model(x), atol=1e-5, rtol=1e-5)
    assert not torch.equal(permuted.gates[0].C, model.gates[0].C)
