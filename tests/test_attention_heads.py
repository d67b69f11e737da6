"""Attention heads in derived specs (lmcflow.alignment.heads): ``nn.MultiheadAttention`` (packed and separate q/k/v
weights, batch first or not, with and without biases, with learned key/value biases) gets a head group for q and k,
one for v and ``out_proj``, and a stacked group for the packed rows; random permutations of whole heads and
within each head leave the float64 outputs unchanged (the proof), a permutation that breaks a head block is
rejected, and weight matching, activation matching and random permutation keep heads whole. A model's own
attention written with ``view``/``transpose`` and ``F.scaled_dot_product_attention`` gets the same head groups
(graph_axes.resolve_splits), unless something shared across heads (a per-head-dim scale) forbids them. timm's
packed form (``qkv(x).reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)``, then ``unbind(0)`` or indexing) is derived
with the attention's q/k/v rows and output projection's columns kept in order, the reshape named as the reason."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lmcflow.alignment import apply_permutation
from lmcflow.alignment.coverage import hidden_axes
from lmcflow.alignment.derive import derived_spec, example_batch
from lmcflow.alignment.heads import compose, decompose, draw, head_step
from lmcflow.alignment.methods import activation_matching, random_permutation, weight_matching


class MHANet(nn.Module):
    """Tokens -> embedding -> one attention block (pre-norm, residual) -> MLP -> mean over tokens -> classes."""

    def __init__(self, dim=12, heads=3, batch_first=True, kdim=None, bias=True, bias_kv=False):
        super().__init__()
        self.batch_first = batch_first
        self.embed = nn.Linear(5, dim)
        self.kv_embed = nn.Linear(5, kdim) if kdim else None
        self.norm = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=batch_first, kdim=kdim, vdim=kdim, bias=bias,
                                          add_bias_kv=bias_kv)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 3)

    def forward(self, x):  # x: (N, L, 5)
        h = self.embed(x)
        kv = self.kv_embed(x) if self.kv_embed is not None else self.norm(h)
        q = self.norm(h)
        if not self.batch_first:
            q, kv = q.transpose(0, 1), kv.transpose(0, 1)
        a = self.attn(q, kv, kv, need_weights=False)[0]
        if not self.batch_first:
            a = a.transpose(0, 1)
        h = h + a
        h = h + self.mlp(h)
        return self.head(h.mean(1))


class SDPANet(nn.Module):
    """A model's own attention: separate q/k/v projections split into heads by ``view``, SDPA, merged back by
    ``reshape``; ``qk_scale``: one learned scale over the head dimension shared by all heads (q·k scaled)."""

    def __init__(self, dim=12, heads=3, qk_scale=False):
        super().__init__()
        self.heads = heads
        self.embed = nn.Linear(5, dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.scale = nn.Parameter(torch.rand(dim // heads) + 0.5) if qk_scale else None
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        h = self.embed(x)
        n, length, e = h.shape
        z = self.norm(h)
        q, k, v = (f(z).view(n, length, self.heads, e // self.heads).transpose(1, 2) for f in (self.q, self.k, self.v))
        if self.scale is not None:
            q = q * self.scale
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(n, length, e)
        h = h + self.o(a)
        return self.head(h.mean(1))


CASES = {
    "packed": {},
    "packed_seq_first": {"batch_first": False},
    "separate_qkv": {"kdim": 7},
    "separate_seq_first_no_bias": {"kdim": 7, "batch_first": False, "bias": False},
    "bias_kv": {"bias_kv": True},
}


def _spec(kw):
    torch.manual_seed(0)
    model = MHANet(**kw)
    return model, derived_spec(model, example_batch((4, 5), 4))


@pytest.mark.parametrize("case", list(CASES))
def test_multihead_attention_gets_head_groups_and_every_hidden_axis_is_permuted(case):
    model, spec = _spec(CASES[case])
    assert spec.proof_residual < 1e-12
    qk, vo = "attn.qk", "attn.vo"
    assert spec.heads == {qk: ("attn", 3), vo: ("attn", 3)}
    assert spec.axes["attn.out_proj.weight"][1] == vo
    if "kdim" in CASES[case]:
        assert spec.axes["attn.q_proj_weight"][0] == spec.axes["attn.k_proj_weight"][0] == qk
        assert spec.axes["attn.v_proj_weight"][0] == vo
    else:
        assert spec.axes["attn.in_proj_weight"][0] == "attn.in_proj"
    if CASES[case].get("bias", True):
        assert spec.stacks["attn.in_proj"] == ((qk, 12), (qk, 12), (vo, 12))
    if CASES[case].get("bias_kv"):
        assert spec.axes["attn.bias_k"] == (None, None, qk) and spec.axes["attn.bias_v"] == (None, None, vo)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert all(g is not None for g in hidden_axes(spec, shapes).values())  # 100% coverage


def test_a_permutation_that_breaks_a_head_is_refused():
    model, spec = _spec({})
    perms = draw(spec, torch.Generator().manual_seed(0))
    broken = dict(perms, **{"attn.qk": perms["attn.qk"].roll(1)})  # one unit into the next head
    with pytest.raises(ValueError, match="moves units between heads"):
        apply_permutation(spec, model.state_dict(), broken)
    stale = dict(perms, **{"attn.vo": compose(torch.arange(3), [torch.arange(4)] * 3)})
    with pytest.raises(ValueError):  # vo's heads stay while qk's move, or the packed rows disagree
        apply_permutation(spec, model.state_dict(), stale)


def test_head_step_is_the_exact_optimum_over_head_structured_permutations():
    gen = torch.Generator().manual_seed(1)
    sigma = torch.tensor([2, 0, 1])
    truth = {g: compose(sigma, [torch.randperm(2, generator=gen) for _ in range(3)]) for g in ("qk", "vo")}
    costs = {g: torch.randn(6, 6, generator=gen).double().numpy() * 0.1 for g in truth}
    for g, p in truth.items():
        costs[g][torch.arange(6), p] += 1.0  # the planted structured assignment dominates
    got = head_step(costs, 3)
    assert all(torch.equal(got[g], truth[g]) for g in truth)
    assert decompose(got["qk"], 3)[0].tolist() == [2, 0, 1]


@pytest.mark.parametrize("case", ["packed", "separate_qkv"])
def test_alignment_methods_recover_a_permuted_copy_with_heads_whole(case):
    model, spec = _spec(CASES[case])
    perms, _ = random_permutation(spec, 3)
    assert decompose(perms["attn.qk"], 3) is not None
    sd_b = apply_permutation(spec, model.state_dict(), perms)
    inverse = {g: torch.argsort(p) for g, p in perms.items()}
    for init in ("identity", "forward"):
        got, _ = weight_matching(spec, model.state_dict(), sd_b, init=init)
        assert all(torch.equal(got[g], inverse[g]) for g in spec.groups), init
    b = MHANet(**CASES[case])
    b.load_state_dict(sd_b)
    got, _ = activation_matching(model, b, spec, torch.randn(64, 4, 5, generator=torch.Generator().manual_seed(2)))
    assert all(torch.equal(got[g], inverse[g]) for g in spec.groups)


def test_per_head_attention_weights_keep_the_heads_in_order():
    class PerHead(MHANet):
        def forward(self, x):
            h = self.norm(self.embed(x))
            a, w = self.attn(h, h, h, average_attn_weights=False)
            return self.head(a.mean(1)) + w.mean((2, 3)).sum(1, keepdim=True)

    torch.manual_seed(0)
    model = PerHead()
    spec = derived_spec(model, example_batch((4, 5), 4))
    assert not spec.heads and spec.axes["attn.in_proj_weight"][0] is None
    assert "per-head attention weights" in spec.fixed["attn.in_proj_weight:0"]


def test_a_models_own_sdpa_attention_gets_head_groups():
    torch.manual_seed(0)
    model = SDPANet()
    spec = derived_spec(model, example_batch((4, 5), 4))
    assert spec.proof_residual < 1e-12
    assert spec.axes["q.weight"][0] == spec.axes["k.weight"][0] == "q" and spec.axes["o.weight"][1] == "v"
    assert spec.heads == {"q": ("q:heads", 3), "v": ("q:heads", 3)}
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert all(g is not None for g in hidden_axes(spec, shapes).values())
    perms, _ = random_permutation(spec, 5)
    sd_b = apply_permutation(spec, model.state_dict(), perms)
    got, _ = weight_matching(spec, model.state_dict(), sd_b)
    assert all(torch.equal(got[g], torch.argsort(perms[g])) for g in spec.groups)
    b = SDPANet()
    b.load_state_dict(sd_b)
    got, _ = activation_matching(model, b, spec, torch.randn(64, 4, 5, generator=torch.Generator().manual_seed(2)))
    assert all(torch.equal(got[g], torch.argsort(perms[g])) for g in spec.groups)


def test_a_scale_shared_across_heads_keeps_the_heads_in_order():
    torch.manual_seed(0)
    model = SDPANet(qk_scale=True)
    spec = derived_spec(model, example_batch((4, 5), 4))
    assert not spec.heads and spec.axes["q.weight"][0] is None
    assert "merges or splits" in spec.fixed["q.weight:0"]


class TimmNet(nn.Module):
    """timm's ``Attention``: one packed q/k/v projection split with ``reshape(B, N, 3, H, d).permute(2, 0, 3, 1, 4)``
    and taken apart with ``unbind(0)`` (current timm) or indexing (older timm), SDPA, then ``proj``; an MLP."""

    def __init__(self, dim=12, heads=3, unbind=True):
        super().__init__()
        self.heads, self.unbind = heads, unbind
        self.embed, self.norm = nn.Linear(5, dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 3)

    def forward(self, x):
        h = self.embed(x)
        b, n, c = h.shape
        qkv = self.qkv(self.norm(h)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0) if self.unbind else (qkv[0], qkv[1], qkv[2])
        h = h + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, c))
        h = h + self.mlp(h)
        return self.head(h.mean(1))


@pytest.mark.parametrize("unbind", [True, False])
def test_timm_packed_attention_is_derived_with_its_heads_kept_in_order(unbind):
    torch.manual_seed(0)
    spec = derived_spec(TimmNet(unbind=unbind), example_batch((4, 5), 4))
    assert spec.proof_residual < 1e-8 and not spec.heads and not spec.stacks
    assert set(spec.groups) == {"embed", "mlp.0"}  # the residual stream and the MLP's hidden units
    for key in ("qkv.weight:0", "qkv.bias:0", "proj.weight:1"):
        assert "reshape" in spec.fixed[key] and "merges or splits" in spec.fixed[key], key
    assert spec.axes["qkv.weight"] == (None, "embed") and spec.axes["proj.weight"] == ("embed", None)
