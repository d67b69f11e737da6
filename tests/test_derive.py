"""The permutation spec derived from the traced graph (lmcflow.alignment.derive): proven on torchvision's models and
lmcflow's own, equal to the rule-based spec of lmcflow's architectures, refusing what it does not know, and used
unchanged by weight and activation matching."""
import copy
import functools
import itertools

import pytest
import torch
import torchvision.models as tvm
from torch import nn

from lmcflow.alignment import PermutationSpec, activation_matching, apply_permutation, permutation_spec, weight_matching
from lmcflow.alignment.coverage import hidden_axes
from lmcflow.alignment.derive import SpecProofError, derived_spec, example_batch, prove_spec
from lmcflow.alignment.graph_axes import UnsupportedGraph
from lmcflow.models import ModelSpec, build_model

TORCHVISION = [  # (name, kwargs, input shape): small inputs keep the proofs fast
    ("resnet18", {}, (3, 32, 32)),
    ("resnet50", {}, (3, 32, 32)),
    ("mobilenet_v3_small", {}, (3, 32, 32)),
    ("convnext_tiny", {}, (3, 32, 32)),
    ("vit_b_16", {"image_size": 32}, (3, 32, 32)),
    ("vgg11_bn", {}, (3, 32, 32)),
]


def _tv(name, kw):
    torch.manual_seed(0)
    return tvm.get_model(name, weights=None, num_classes=5, **kw)


@functools.cache
def _tv_spec(name):
    name, kw, shape = next(t for t in TORCHVISION if t[0] == name)
    return derived_spec(_tv(name, kw), example_batch(shape, 2))  # raises unless the proof holds at 1e-5


def _partition(spec):
    return sorted((spec.sizes[g], tuple(sorted(spec.members[g]))) for g in spec.groups)


@pytest.mark.parametrize("name,kw,shape", TORCHVISION, ids=[t[0] for t in TORCHVISION])
def test_torchvision_models_derive_and_prove(name, kw, shape):
    model = _tv(name, kw)
    spec = _tv_spec(name)
    assert len(spec.groups) >= 5 and all(n > 1 for n in spec.sizes.values())
    assert set(spec.axes) == set(model.state_dict())
    for key in spec.axes:  # the model's input and output axes are never permuted
        if key.endswith("weight") and spec.axes[key]:
            assert not (key == _first_weight(model) and spec.axes[key][1] is not None)
    # activation matching reads every group at graph nodes, except an attention's q/k/v, which no node holds
    assert all(spec.feature_nodes[g] for g in spec.groups if g not in spec.heads and g not in spec.stacks)


def _first_weight(model):
    return next(k for k, v in model.state_dict().items() if k.endswith("weight") and v.dim() > 1)


def test_attention_permutes_heads_as_blocks_and_joins_the_residual_stream():
    spec = _tv_spec("vit_b_16")
    attn = "encoder.layers.encoder_layer_0.self_attention"
    stream = spec.axes["conv_proj.weight"][0]
    qk, vo, packed = f"{attn}.qk", f"{attn}.vo", f"{attn}.in_proj"
    assert spec.axes[f"{attn}.in_proj_weight"] == (packed, stream)  # q, k, v rows: a stack of head groups
    assert spec.axes[f"{attn}.in_proj_bias"] == (packed,)
    assert spec.axes[f"{attn}.out_proj.weight"] == (stream, vo)
    assert spec.heads[qk] == spec.heads[vo] == (attn, 12)
    assert spec.stacks[packed] == ((qk, 768), (qk, 768), (vo, 768))
    assert spec.axes["encoder.ln.weight"] == (stream,) and spec.axes["heads.head.weight"] == (None, stream)
    assert not [k for k in spec.fixed if "self_attention" in k]
    shapes = {k: tuple(v.shape) for k, v in _tv("vit_b_16", {"image_size": 32}).state_dict().items()}
    left = [a for a, g in hidden_axes(spec, shapes).items() if g is None]
    assert left == ["encoder.pos_embedding:1"]  # token positions: the cat that puts the class token first


VARIANTS = [(a, n, s) for a, n, s in itertools.product(
    ("mlp", "vgg11", "resnet20"), ("none", "layernorm", "batchnorm", "groupnorm"),
    ("standard", "w_asymmetric", "syre", "sigma_asymmetric"))
    if not (a == "mlp" and n == "groupnorm") and not (a != "mlp" and n == "layernorm")]


@pytest.mark.parametrize("arch,norm,sym", VARIANTS)
def test_derived_spec_equals_the_rule_based_spec_of_lmcflow_models(arch, norm, sym):
    shape = (1, 28, 28) if arch == "mlp" else (3, 32, 32)
    model = build_model(ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.125, depth=2, base_width=32,
                                  norm=norm, symmetry={"kind": sym, "n_fixed": 2}))
    rules = permutation_spec(model)
    derived = derived_spec(model, example_batch(shape, 2))
    assert _partition(derived) == _partition(rules)
    # the same activations define each group: hidden_features holds one entry per feature node
    assert sorted(len(v) for v in derived.feature_nodes.values()) == \
        sorted(len(v) for v in rules.feature_indices.values())


class _Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.norm = nn.GroupNorm(2, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.cumsum(self.fc(x), dim=1)
        return self.head(self.norm(h))


def test_unsupported_ops_are_refused_with_every_node_and_the_override():
    with pytest.raises(UnsupportedGraph) as err:
        derived_spec(_Unsupported(), torch.randn(4, 6))
    msg = str(err.value)
    assert "2 node(s)" in msg and "cumsum" in msg and "module norm" in msg and "GroupNorm(2, 8)" in msg
    assert "model.trace_overrides" in msg
    # kept whole, nothing is permuted on a guess: a spec without a group is a refusal, not a result
    with pytest.raises(UnsupportedGraph, match="has no group"):
        derived_spec(_Unsupported(), torch.randn(4, 6), overrides={"norm": "fixed", "cumsum": "fixed"})


class _Broken(nn.Module):
    """Declared elementwise, but it mixes units: the proof must catch it and name the group."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 8)
        self.mix = nn.Identity()
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(torch.roll(self.fc(x), 1, dims=1))


def test_a_wrong_spec_fails_its_proof_naming_the_group():
    with pytest.raises(SpecProofError, match=r"failing groups: fc "):
        derived_spec(_Broken(), torch.randn(4, 6), overrides={"roll": "elementwise"})
    model, spec = _tv("resnet18", {}), _tv_spec("resnet18")
    g = spec.axes["layer1.0.conv1.weight"][0]
    broken = {**spec.axes, "layer1.0.bn1.weight": (None,)}  # a norm scale that no longer follows its channels
    spec = PermutationSpec(spec.arch, broken, spec.sizes, {}, spec.parameters)
    with pytest.raises(SpecProofError, match=rf"failing groups: {g.replace('.', '[.]')} "):
        prove_spec(model, spec, example_batch((3, 32, 32), 2))


def _planted(model, spec, seed=0, noise=0.0):
    g = torch.Generator().manual_seed(seed)
    perms = {grp: torch.randperm(n, generator=g) for grp, n in spec.sizes.items()}
    sd = apply_permutation(spec, model.state_dict(), perms)
    if noise:
        sd = {k: v + noise * v.std() * torch.randn(v.shape, generator=g) if v.is_floating_point() and v.numel() > 1
              else v for k, v in sd.items()}
    b = copy.deepcopy(model)
    b.load_state_dict(sd)
    return b, perms


def _recovered(found, planted):
    inv = {g: torch.argsort(p) for g, p in planted.items()}
    return sum(int((found[g] == inv[g]).sum()) for g in planted) / sum(len(p) for p in planted.values())


def test_weight_and_activation_matching_recover_a_planted_permutation_of_a_torchvision_model():
    model = build_model(ModelSpec(arch="factory", factory="examples.user_model.resnets:resnet18", width=0.125,
                                  width_kwargs={"base_width": 64}, in_shape=(1, 28, 28), num_classes=10)).eval()
    spec = permutation_spec(model)
    b, planted = _planted(model, spec, noise=0.01)
    perms, _ = weight_matching(spec, model.state_dict(), b.state_dict(), max_iter=20)
    assert _recovered(perms, planted) > 0.99
    b, planted = _planted(model, spec, seed=1)  # features read at the graph's nodes, no hidden_features
    perms, info = activation_matching(model, b, spec, example_batch((1, 28, 28), 32), batch_size=16)
    assert set(info["per_group"]) == set(spec.groups)
    # units whose features correlate 1 with their copy are recovered; dead ReLUs of a random init are not
    clean = [g for g, c in info["per_group"].items() if c > 0.999]
    assert len(clean) >= 2 and _recovered(perms, planted) > 0.85
    assert all(torch.equal(perms[g], torch.argsort(planted[g])) for g in clean)


def test_models_from_outside_lmcflow_build_and_derive():
    tv = build_model(ModelSpec(arch="torchvision:mobilenet_v3_small", in_shape=(1, 28, 28), num_classes=10,
                               kwargs={"dropout": 0.0}, width_kwargs={"width_mult": 0.5}))
    assert tv(torch.randn(2, 1, 28, 28)).shape == (2, 10)
    user = ModelSpec(arch="factory", factory="examples.user_model.net:build", in_shape=(1, 28, 28),
                     num_classes=10, width=0.5, width_kwargs={"channels": 32})
    model = build_model(user)
    assert model.stem[0].out_channels == 16  # width 0.5 × channels 32
    spec = permutation_spec(model)
    assert spec.sizes[spec.axes["stem.0.weight"][0]] == 16 and spec.fixed == {
        k: v for k, v in spec.fixed.items() if "model's" in v}
    with pytest.raises(ValueError, match="no classification model 'resnet_nope'"):
        build_model(ModelSpec(arch="torchvision:resnet_nope", in_shape=(3, 32, 32), num_classes=10))
    with pytest.raises(ValueError, match="no function 'nope'"):
        build_model(ModelSpec(arch="factory", factory="examples.user_model.net:nope", in_shape=(1, 28, 28),
                              num_classes=10))
