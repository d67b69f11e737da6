"""The proof cannot be fooled by a freshly built model: broken versions of derived specs (a member dropped, an axis
swapped, a group split, two groups merged onto one tensor, a scale forgotten; in attention a wrong head block, q/k
and v/out moving heads independently, q permuted without k) are rejected for every architecture here, ConvNeXt's
1e-6 layer scale and BatchNorm's initial statistics included; an attention mask is read by the attention rules, so
a learned attention bias gets no group of its own.

A merge of two groups that share no tensor is left out on purpose: permuting both by one permutation is a
symmetry of the model too (a coarser one), so no output check can or should reject it."""
import random

import pytest
import torch
import torch.nn.functional as F
import torchvision.models as tvm
from torch import nn
from torchvision.models.convnext import CNBlockConfig, ConvNeXt
from torchvision.models.vision_transformer import VisionTransformer

from examples.user_model.net import build as user_net
from examples.user_model.resnets import WidthResNet
from lmcflow.alignment import PermutationSpec, apply_permutation
from lmcflow.alignment.derive import SpecProofError, derived_spec, example_batch, prove_spec
from lmcflow.alignment.heads import draw
from lmcflow.alignment.proof import proof_state
from lmcflow.alignment.table import inverse, permute_in_place
from lmcflow.models import ModelSpec, build_model
from tests.test_attention_heads import SDPANet, TimmNet


class AttnBiasNet(nn.Module):
    """Tokens, a learned additive attention bias (attn_mask), a 1e-6 layer scale: the issue's ViT-style case."""

    def __init__(self, dim=8, tokens=4, heads=2, functional=False):
        super().__init__()
        self.embed = nn.Linear(6, dim)
        self.bias = nn.Parameter(torch.randn(tokens, tokens))
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.functional = functional
        self.scale = nn.Parameter(1e-6 * torch.ones(dim))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        h = self.embed(x)
        if self.functional:
            a = self.o(F.scaled_dot_product_attention(self.q(h), self.k(h), self.v(h), attn_mask=self.bias))
        else:
            a = self.attn(h, h, h, attn_mask=self.bias, need_weights=False)[0]
        h = h + self.scale * a
        return self.head(self.norm(h).mean(1))


class SeparateQKV(nn.Module):
    """``nn.MultiheadAttention`` with separate q/k/v weights (kdim ≠ embed_dim), sequence first, learned k/v biases."""

    def __init__(self, dim=12, heads=3):
        super().__init__()
        self.embed, self.kv = nn.Linear(6, dim), nn.Linear(6, 5)
        self.attn = nn.MultiheadAttention(dim, heads, kdim=5, vdim=5, add_bias_kv=True)
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        h, kv = self.embed(x).transpose(0, 1), self.kv(x).transpose(0, 1)
        return self.head((h + self.attn(h, kv, kv, need_weights=False)[0]).mean(0))


def _lmc(arch, norm):
    shape = (1, 28, 28) if arch == "mlp" else (3, 32, 32)
    return build_model(ModelSpec(arch=arch, in_shape=shape, num_classes=10, width=0.125, depth=2, base_width=32,
                                 norm=norm)), shape


ARCHS = {  # small builds of each family keep the many proofs cheap
    "mlp": lambda: _lmc("mlp", "batchnorm"),
    "vgg11": lambda: _lmc("vgg11", "batchnorm"),
    "resnet20": lambda: _lmc("resnet20", "batchnorm"),
    "resnet18": lambda: (WidthResNet(8, 5, 3, layers=(1, 1, 1, 1)), (3, 32, 32)),
    "mobilenet_v3_small": lambda: (tvm.mobilenet_v3_small(width_mult=0.25, num_classes=5), (3, 32, 32)),
    "convnext": lambda: (ConvNeXt([CNBlockConfig(8, 16, 1), CNBlockConfig(16, None, 1)], num_classes=5),
                         (3, 32, 32)),
    "vit": lambda: (VisionTransformer(image_size=16, patch_size=8, num_layers=2, num_heads=2, hidden_dim=16,
                                      mlp_dim=32, num_classes=5), (3, 16, 16)),
    "user_net": lambda: (user_net(5, (3, 16, 16), channels=8), (3, 16, 16)),
    "attn_bias_mha": lambda: (AttnBiasNet(), (4, 6)),
    "attn_bias_sdpa": lambda: (AttnBiasNet(functional=True), (4, 6)),
    "mha_separate_qkv": lambda: (SeparateQKV(), (4, 6)),
    "sdpa_heads": lambda: (SDPANet(), (4, 5)),
    "timm_qkv_unbind": lambda: (TimmNet(), (4, 5)),
    "mnasnet": lambda: (tvm.MNASNet(0.25, num_classes=5), (3, 32, 32)),
}


def _respec(spec, axes, sizes=None, heads=None, stacks=None):
    return PermutationSpec(spec.arch, axes, dict(sizes or spec.sizes), {}, spec.parameters,
                           heads=dict(spec.heads if heads is None else heads),
                           stacks=dict(spec.stacks if stacks is None else stacks))


def head_variants(spec):
    """[(kind, what, broken spec)] of an attention: a wrong head block (twice the heads of half the size, or one
    head of all units), its q/k and v/out groups moving heads independently (a split tie), k's rows kept in order
    while q's move (q permuted without k)."""
    out = []
    tie, groups = next(((t, [g for g in spec.heads if spec.heads[g][0] == t]) for t, _ in spec.heads.values()),
                       (None, []))
    if not groups:
        return out
    h = spec.heads[groups[0]][1]
    d = spec.sizes[groups[0]] // h
    count = 2 * h if d % 2 == 0 else 1
    out.append(("wrong head block", f"{tie}: {count} heads instead of {h}",
                _respec(spec, spec.axes, heads={**spec.heads, **{g: (tie, count) for g in groups}})))
    out.append(("split a tie", f"{groups[1]} moves its heads alone",
                _respec(spec, spec.axes, heads={**spec.heads, groups[1]: (f"{tie}~split", h)})))
    first = spec.members[groups[0]][0][0].rpartition(".")[0] if spec.members[groups[0]] else None
    key = next((k for k, _ in spec.members[groups[0]] if k.endswith("k_proj_weight") or
                (k.endswith(".weight") and k.rpartition(".")[0] != first)), None)
    if key is not None:  # separate q/k/v weights: k's rows kept in order
        out.append(("q permuted without k", key, _respec(spec, _set(spec, key, 0, None))))
    else:  # the k rows of the packed in_proj_weight kept in order
        packed = next(s for s, parts in spec.stacks.items() if parts[0][0] == groups[0])
        (qk, n), _, vo = spec.stacks[packed]
        out.append(("q permuted without k", packed,
                    _respec(spec, spec.axes, stacks={**spec.stacks, packed: ((qk, n), (None, n), vo)})))
    return out


def _set(spec, key, d, g):
    axes = dict(spec.axes)
    ax = list(axes[key])
    ax[d] = g
    axes[key] = tuple(ax)
    return axes


def variants(spec, sd, seed=0):
    """[(kind, what, broken spec)]: up to two of each kind, drawn with ``seed``."""
    rng = random.Random(seed)
    members = [(g, key, d) for g in spec.groups for key, d in spec.members[g]]
    out = []

    def pick(items, n=2):
        return rng.sample(items, min(n, len(items)))

    # a key projection's bias shifts all of a query's logits alike, which softmax ignores: not a member to drop
    def key_bias(g, k):
        module = spec.members[g][0][0].rpartition(".")[0]
        return g in spec.heads and k.endswith("bias") and k.rpartition(".")[0] != module

    droppable = [(g, k, d) for g, k, d in members if not key_bias(g, k)]
    for g, key, d in pick(droppable, 3):
        out.append(("drop a member", f"{key}:{d} of {g}", _respec(spec, _set(spec, key, d, None))))
    scales = [(g, k, d) for g, k, d in members if k.rpartition(".")[2] in ("weight", "layer_scale", "scale")
              and sum(n > 1 for n in sd[k].shape) == 1]
    for g, key, d in pick(scales):
        out.append(("forget a scale", f"{key} of {g}", _respec(spec, _set(spec, key, d, None))))
    wrong = [(g, k, d, d2) for g, k, d in members for d2 in range(sd[k].dim())
             if d2 != d and sd[k].shape[d2] == sd[k].shape[d] and spec.axes[k][d2] != g]
    for g, key, d, d2 in pick(wrong):
        axes = _set(spec, key, d, spec.axes[key][d2])
        axes[key] = tuple(g if i == d2 else a for i, a in enumerate(axes[key]))
        out.append(("wrong axis", f"{key}: {g} moved from axis {d} to {d2}", _respec(spec, axes)))
    for g in pick([g for g in spec.groups if len(spec.members[g]) >= 2]):
        axes = dict(spec.axes)
        for key, d in spec.members[g][1::2]:
            axes[key] = tuple(f"{g}~split" if i == d else a for i, a in enumerate(axes[key]))
        out.append(("split a group", g, _respec(spec, axes, {**spec.sizes, f"{g}~split": spec.sizes[g]})))
    shared = sorted({(a, b) for k in spec.parameters for a in spec.axes[k] for b in spec.axes[k]
                     if a and b and a < b and spec.sizes[a] == spec.sizes[b]})
    for a, b in pick(shared):
        axes = {k: tuple(a if x == b else x for x in ax) for k, ax in spec.axes.items()}
        out.append(("merge two groups", f"{b} into {a}", _respec(spec, axes, {g: n for g, n in spec.sizes.items()
                                                                            if g != b})))
    return out + head_variants(spec)


@pytest.mark.parametrize("name", list(ARCHS))
def test_the_proof_rejects_every_broken_variant_of_a_derived_spec(name):
    torch.manual_seed(0)
    model, shape = ARCHS[name]()
    x = example_batch(shape, 4)
    spec = derived_spec(model, x)
    assert spec.proof_residual < 1e-8
    sd = model.state_dict()
    state = proof_state(model, x)
    found = variants(spec, sd)
    assert len({kind for kind, _, _ in found}) >= 3
    if spec.heads:
        assert {"wrong head block", "split a tie", "q permuted without k"} <= {kind for kind, _, _ in found}
    accepted = []
    for kind, what, broken in found:
        try:
            prove_spec(model, broken, x, state=state, name_groups=False)
            accepted.append(f"{kind}: {what}")
        except SpecProofError:
            pass
    assert not accepted, f"{name}: the proof accepted {len(accepted)} of {len(found)} broken specs: {accepted}"


def test_an_attention_mask_follows_the_sequence_axes():
    spec = derived_spec(AttnBiasNet(), example_batch((4, 6), 4))
    assert spec.axes["bias"] == (None, None)  # token positions are the model's input axis: kept in order
    assert spec.axes["scale"] == (spec.axes["embed.weight"][0],)


def test_the_proof_permutes_its_one_copy_in_place_and_leaves_it_bit_for_bit():
    """The proof's one float64 copy: its values are float32 numbers (the float32 check's casts are exact), each
    check permutes it in place as apply_permutation would and undoes that, a failed check (naming its groups) too."""
    torch.manual_seed(0)
    model, shape = ARCHS["vit"]()  # heads and a packed q/k/v stack
    x = example_batch(shape, 4)
    spec = derived_spec(model, x)
    state = proof_state(model, x)
    before = {k: v.clone() for k, v in state.state_dict().items()}
    floats = [v for v in before.values() if v.is_floating_point()]
    assert floats and all(v.dtype == torch.float64 and torch.equal(v, v.float().double()) for v in floats)
    perms = draw(spec, torch.Generator().manual_seed(3))
    expected = apply_permutation(spec, before, perms)
    permute_in_place(spec, state, perms)
    assert any(not torch.equal(before[k], v) for k, v in expected.items())
    assert all(torch.equal(state.state_dict()[k], v) for k, v in expected.items())
    permute_in_place(spec, state, inverse(perms))
    assert all(torch.equal(state.state_dict()[k], v) for k, v in before.items())
    assert prove_spec(model, spec, x, state=state) < 1e-8
    _, _, broken = variants(spec, model.state_dict())[0]  # a member dropped
    with pytest.raises(SpecProofError, match="failing groups"):
        prove_spec(model, broken, x, state=state)
    after = state.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())


def test_a_failed_allocation_in_the_proof_is_not_reported_as_the_models_fault(monkeypatch):
    """Only deepcopy's own refusal (hook-based weight_norm) is a refusal of the model; running out of memory while
    copying it propagates as it is."""
    import lmcflow.alignment.proof as proof

    def no_memory(_model):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory")

    model, shape = ARCHS["mlp"]()
    x = example_batch(shape, 2)
    monkeypatch.setattr(proof.copy, "deepcopy", no_memory)
    with pytest.raises(RuntimeError, match="can't allocate memory") as err:
        proof_state(model, x)
    assert not isinstance(err.value, ValueError)
