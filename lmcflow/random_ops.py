"""Each model's own random stream: dropout (and the other random ops a model's forward may call) drawn from
counter-based values hashed from the model's seed, the training step, the op's place in the forward and the
element's index. A model then draws the same bits whether it trains alone (``training.train``) or as a member of
a stacked bundle under ``torch.func.vmap`` (``lmcflow.stacked_model``), where a generator cannot be given to each
member; the values are integer arithmetic, so they are the same on every device and thread count too.

``SeededRandomness`` is a ``TorchFunctionMode``: inside it, the random ops below compute their values from the
step key of the current forward pass (``step_key(seed, step)``, one per member: under vmap a batched 0-d tensor)
instead of from a generator. Nothing is drawn from torch's generators, so nothing else's randomness moves.

Replaced: ``F.dropout``, ``F.dropout1d/2d/3d``, ``F.alpha_dropout``, ``F.feature_alpha_dropout`` (so
``nn.Dropout*`` and ``nn.AlphaDropout``), ``F.scaled_dot_product_attention`` with ``dropout_p > 0`` (so
``nn.MultiheadAttention``'s dropout), ``torch.rand``/``rand_like``, ``torch.randn``/``randn_like``,
``torch.bernoulli`` and ``Tensor.bernoulli_``/``uniform_``/``normal_``. Any other random op
(``torch.randint``, ``multinomial``, ``F.rrelu``, ...) is refused by ``check_random_ops`` before training, naming it.
Uniform values have 24 random bits; normal values come from two of them by Box-Muller (whose log and cos may
round differently in vectorised and scalar kernels, so only the uniform-based ops carry the bit-for-bit promise of
docs/usage.md, "Bundles").
"""
from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from lmcflow.seeding import derive_seed

_M32 = 0xFFFFFFFF
_C1, _C2 = 0x7FEB352D, 0x846CA68B  # lowbias32 (C. Wellons, "Hash function prospector")
_BITS = 1 << 24


def _mix_int(x: int) -> int:
    """lowbias32 of a Python int (0 <= x < 2^32)."""
    x ^= x >> 16
    x = (x * _C1) & _M32
    x ^= x >> 15
    x = (x * _C2) & _M32
    return x ^ (x >> 16)


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x · c) mod 2^32 for int64 x in [0, 2^32), without overflowing int64."""
    return ((x & 0xFFFF) * c + ((((x >> 16) * c) & 0xFFFF) << 16)) & _M32


def _mix(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = _mul32(x, _C1)
    x = x ^ (x >> 15)
    x = _mul32(x, _C2)
    return x ^ (x >> 16)


def step_key(seed: int, step: int) -> int:
    """The 32-bit key of model ``seed``'s forward pass at training step ``step`` (0-based, global)."""
    k = derive_seed("random-ops", seed)
    return _mix_int(_mix_int(_mix_int(k & _M32) ^ (k >> 32) & _M32) ^ (step & _M32))


def step_keys(seeds: list[int], step: int, device) -> torch.Tensor:
    """(K,) int64 step keys of a bundle's members, for ``bundle_forward``."""
    return torch.tensor([step_key(s, step) for s in seeds], dtype=torch.int64, device=device)


_DROPOUT_SPATIAL = {F.dropout1d: 1, F.dropout2d: 2, F.dropout3d: 3, F.feature_alpha_dropout: -1}
_ALPHA = 1.7580993408473766  # SELU's -alpha*scale, as torch's alpha dropout


class SeededRandomness(TorchFunctionMode):
    """The random ops of a forward pass computed from ``key`` (module doc). ``key`` is set per pass with
    ``at(key)``; ``calls`` numbers the ops of the pass. ``seen`` collects the names of the random ops met."""

    def __init__(self):
        super().__init__()
        self.key: torch.Tensor | None = None
        self.calls = 0
        self.seen: set[str] = set()

    def at(self, key: torch.Tensor) -> SeededRandomness:
        self.key, self.calls = key, 0
        return self

    # ------------------------------------------------------------------ values
    def _bits(self, shape, device) -> torch.Tensor:
        """24-bit uniform integers of ``shape`` for the next op of the pass (batched like the key under vmap)."""
        n = math.prod(shape)
        if n >= 1 << 32:
            raise RuntimeError(f"a random op of {n} elements exceeds lmcflow's counter range (2^32)")
        c = _mix_int((self.calls * 0x9E3779B9 + 0x632BE5AB) & _M32)
        self.calls += 1
        base = _mix(self.key.to(device) ^ c)
        return (_mix((base + torch.arange(n, device=device)) & _M32) >> 8).reshape(shape)

    def _uniform(self, shape, device, dtype) -> torch.Tensor:
        return (self._bits(shape, device).to(torch.float32) * (1.0 / _BITS)).to(dtype)

    def _normal(self, shape, device, dtype) -> torch.Tensor:
        u1, u2 = self._uniform(shape, device, torch.float32), self._uniform(shape, device, torch.float32)
        return (torch.sqrt(-2.0 * torch.log1p(-u1)) * torch.cos((2 * math.pi) * u2)).to(dtype)

    def _keep(self, shape, device, p: float) -> torch.Tensor:
        """Bernoulli(1 - p) mask (True: kept)."""
        return self._bits(shape, device) >= round(p * _BITS)

    # ------------------------------------------------------------------ ops
    def _dropout(self, func, x, p=0.5, training=True, inplace=False):
        if not training or p == 0:
            return x
        if p == 1:
            return x.mul_(0) if inplace else x * 0
        spatial = _DROPOUT_SPATIAL.get(func, 0)
        if spatial == -1:  # feature alpha dropout: one draw per channel
            spatial = max(x.dim() - 2, 0)
        shape = tuple(x.shape[:x.dim() - spatial]) + (1,) * spatial
        keep = self._keep(shape, x.device, float(p)).to(x.dtype)
        if func in (F.alpha_dropout, F.feature_alpha_dropout):
            a = ((1 - p) * (1 + p * _ALPHA ** 2)) ** -0.5
            b = (keep - 1) * (_ALPHA * a) + _ALPHA * a * p
            out = x * (keep * a) + b
        else:
            out = x * (keep * (1.0 / (1 - p)))
        return x.copy_(out) if inplace else out

    def _attention(self, func, args, kwargs):
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        a = {**dict(zip(names, args, strict=False)), **kwargs}
        p = float(a.get("dropout_p", 0.0))
        if p == 0:
            return func(*args, **kwargs)
        self.seen.add("scaled_dot_product_attention")
        q, k, v = a["query"], a["key"], a["value"]
        if a.get("enable_gqa") and q.size(-3) != k.size(-3):
            rep = q.size(-3) // k.size(-3)
            k, v = k.repeat_interleave(rep, -3), v.repeat_interleave(rep, -3)
        scale = a.get("scale") or 1 / math.sqrt(q.size(-1))
        w = (q @ k.transpose(-2, -1)) * scale
        mask = a.get("attn_mask")
        if a.get("is_causal"):
            mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        if mask is not None:
            w = w.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else w + mask
        w = self._dropout(F.dropout, torch.softmax(w, -1), p)
        return w @ v

    def _fill(self, name, t, args, kwargs):
        if self.key is not None and torch._C._functorch.is_batchedtensor(self.key) and \
                not torch._C._functorch.is_batchedtensor(t):
            raise RuntimeError(
                f"Tensor.{name} fills a tensor that is not the model's own (made by torch.empty or zeros inside "
                f"forward); in a bundle each member needs its own values there. Write it out of place "
                f"(torch.bernoulli, torch.rand_like) or train this model with train.bundle: 1")
        if name == "bernoulli_":
            p = args[0] if args else kwargs.get("p", 0.5)
            vals = (self._uniform(t.shape, t.device, torch.float32) < p).to(t.dtype) if isinstance(p, torch.Tensor) \
                else (~self._keep(t.shape, t.device, float(p))).to(t.dtype)
        elif name == "uniform_":
            lo, hi = (list(args) + [kwargs.get("from", 0.0), kwargs.get("to", 1.0)][len(args):])[:2]
            vals = self._uniform(t.shape, t.device, t.dtype) * (hi - lo) + lo
        else:  # normal_
            mean, std = (list(args) + [kwargs.get("mean", 0.0), kwargs.get("std", 1.0)][len(args):])[:2]
            vals = self._normal(t.shape, t.device, t.dtype) * std + mean
        return t.copy_(vals)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if func in (F.dropout, F.alpha_dropout, *_DROPOUT_SPATIAL):
            self.seen.add(name)
            return self._dropout(func, *args, **kwargs)
        if func is F.scaled_dot_product_attention:
            return self._attention(func, args, kwargs)
        if func in (torch.rand, torch.randn, torch.rand_like, torch.randn_like):
            self.seen.add(name)
            like = func in (torch.rand_like, torch.randn_like)
            ref = args[0] if like else None
            size = tuple(ref.shape) if like else tuple(kwargs.get("size") or (
                args[0] if len(args) == 1 and not isinstance(args[0], int) else args))
            device = kwargs.get("device") or (ref.device if like else self.key.device)
            dtype = kwargs.get("dtype") or (ref.dtype if like else torch.get_default_dtype())
            draw = self._uniform if func in (torch.rand, torch.rand_like) else self._normal
            return draw(size, torch.device(device), dtype)
        if func is torch.bernoulli:
            self.seen.add(name)
            x = args[0]
            p = args[1] if len(args) > 1 else kwargs.get("p")
            prob = x if p is None else torch.full_like(x, float(p))
            return (self._uniform(x.shape, x.device, torch.float32) < prob).to(x.dtype)
        if func in (torch.Tensor.bernoulli_, torch.Tensor.uniform_, torch.Tensor.normal_):
            self.seen.add(name)
            return self._fill(name, args[0], args[1:], kwargs)
        return func(*args, **kwargs)


class _RandomAtenOps(TorchDispatchMode):
    """Names every random aten op (tag ``nondeterministic_seeded``) that reaches the dispatcher."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.ops.append(str(func.overloadpacket.__name__))
        return func(*args, **(kwargs or {}))


def check_random_ops(model: torch.nn.Module, sample_shape: tuple, name: str = "model") -> bool:
    """Whether ``model``'s training forward calls random ops; raises ValueError naming any op that
    ``SeededRandomness`` does not replace. Runs one forward in train mode on the meta device (no memory, no
    compute); a model that cannot run there is assumed to call random ops (the mode then stays on; it costs
    only Python dispatch)."""
    # a copy on the meta device without the model's hooks (a probe must not be seen), its tensors never copied
    memo = {id(t): (torch.nn.Parameter(torch.empty_like(t, device="meta"), t.requires_grad)
                    if isinstance(t, torch.nn.Parameter) else torch.empty_like(t, device="meta"))
            for t in (*model.parameters(), *model.buffers())}
    probe = copy.deepcopy(model, memo)
    for m in probe.modules():
        for hooks in (m._forward_pre_hooks, m._forward_hooks, m._backward_hooks, m._backward_pre_hooks):
            hooks.clear()
    mode, aten = SeededRandomness(), _RandomAtenOps()
    try:
        with mode.at(torch.zeros((), dtype=torch.int64, device="meta")), aten:
            probe.train()(torch.empty((2, *sample_shape), device="meta"))
    except Exception:  # data-dependent control flow or tensors outside the state dict: cannot tell
        return True
    if aten.ops:
        raise ValueError(f"{name}'s training forward calls random op(s) {', '.join(sorted(set(aten.ops)))}, which "
                         f"lmcflow cannot derive from each model's seed (it replaces dropout, rand, randn and "
                         f"bernoulli; lmcflow/random_ops.py); make the model deterministic in train mode")
    return bool(mode.seen)
