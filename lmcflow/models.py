"""Model zoo: MLP, VGG-11, ResNet-20 (width multiplier) and the sum-of-ReLUs regression model.

Details: docs/internals.md, "`lmcflow.models`".
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lmcflow.config.catalog import ARCHITECTURES  # noqa: F401  (re-exported)
from lmcflow.external import build_external, is_external, needs_rgb
from lmcflow.symmetry import SigmaGate, is_asymmetric, make_conv2d, make_gate, make_linear

NORMS = ("none", "layernorm", "batchnorm", "groupnorm")
ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU}
FEATURE_POINTS = ("post_linear", "post_norm", "post_activation")
INIT_WEIGHTS = ("paper", "torch", "normal")
INIT_BIASES = ("torch", "zero")


def nonlinearity(act: nn.Module, gate: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """A hidden layer's nonlinearity: the σ-asymmetric gate replaces the activation; other gates are identities."""
    return gate(z) if isinstance(gate, SigmaGate) else gate(act(z))


def scaled(channels: int, width: float) -> int:
    """Channel count after the width multiplier (at least 1)."""
    return max(1, int(round(channels * width)))


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to rebuild a model; stored beside every checkpoint."""

    arch: str
    in_shape: tuple  # (C, H, W) or (D,)
    num_classes: int
    width: float = 1.0
    depth: int = 3  # MLP hidden layers
    base_width: int = 512  # MLP hidden units at width 1
    bias: bool = True
    norm: str = "none"
    norm_groups: int = 1
    activation: str = "relu"
    symmetry: dict | None = None  # see lmcflow.symmetry
    init: dict | None = None  # {weights, std, bias}: see init_weights (None: torch's defaults)
    # Models from outside lmcflow (lmcflow.external): arch "torchvision:<name>" or "factory"
    factory: str | None = None  # "package.module:function" (arch "factory")
    kwargs: dict | None = None  # keyword arguments of the builder
    width_kwargs: dict | None = None  # {builder argument: value at width 1}, scaled by width
    trace_overrides: dict | None = None  # {module path: fixed | elementwise} for the derived permutation spec

    @classmethod
    def from_dict(cls, d: dict) -> ModelSpec:
        d = dict(d)
        d["in_shape"] = tuple(d["in_shape"])
        return cls(**d)

    def to_dict(self) -> dict:
        """Every field; the external-model fields only where set, so lmcflow's own models' checkpoint metadata
        (and hashes) do not depend on them."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()
                if not (k in _EXTERNAL_FIELDS and v is None)}


_EXTERNAL_FIELDS = ("factory", "kwargs", "width_kwargs", "trace_overrides")


def _norm1d(kind: str, n: int) -> nn.Module:
    if kind == "layernorm":
        return nn.LayerNorm(n)
    if kind == "batchnorm":
        return nn.BatchNorm1d(n)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"model.norm={kind!r} is not available for the MLP; allowed: none, layernorm, batchnorm")


def _norm2d(kind: str, n: int, groups: int) -> nn.Module:
    if kind == "batchnorm":
        return nn.BatchNorm2d(n)
    if kind == "groupnorm":
        # groups must divide the channel count; with groups=1 (the default) it is a
        # LayerNorm over (C,H,W), which commutes with channel permutations.
        return nn.GroupNorm(math.gcd(groups, n), n)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"model.norm={kind!r} is not available for conv nets; allowed: batchnorm, groupnorm, none")


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        d_in = int(math.prod(spec.in_shape))
        hidden = scaled(spec.base_width, spec.width)
        sym = spec.symmetry or {}
        self.layers = nn.ModuleList()
        self.norms = nn.ModuleList()
        self.gates = nn.ModuleList()
        dims = [d_in] + [hidden] * spec.depth
        for i in range(spec.depth):
            self.layers.append(make_linear(dims[i], dims[i + 1], spec.bias, sym, i))
            self.norms.append(_norm1d(spec.norm, dims[i + 1]))
            self.gates.append(make_gate(dims[i + 1], sym, i))
        self.head = make_linear(hidden, spec.num_classes, spec.bias, sym, spec.depth)
        self.act = ACTIVATIONS[spec.activation]()

    def hidden_features(self, x: torch.Tensor, pre: bool = False, at: str = "post_activation") -> list[torch.Tensor]:
        """Every hidden layer's features at ``at`` (``FEATURE_POINTS``); ``pre=True`` is ``at="post_norm"``
        (the pre-activations)."""
        at = "post_norm" if pre else at
        return self.features_at(x, (at,))[at]

    def features_at(self, x: torch.Tensor, points=FEATURE_POINTS) -> dict[str, list[torch.Tensor]]:
        """{feature point: every hidden layer's features there}, all from one forward pass."""
        unknown = [p for p in points if p not in FEATURE_POINTS]
        if unknown:
            raise ValueError(f"feature point {unknown[0]!r} is unknown; allowed: {', '.join(FEATURE_POINTS)}")
        out = {p: [] for p in points}
        h = x.flatten(1)
        for layer, norm, gate in zip(self.layers, self.norms, self.gates):
            lin = layer(h)
            z = norm(lin)
            h = nonlinearity(self.act, gate, z)
            for p, v in (("post_linear", lin), ("post_norm", z), ("post_activation", h)):
                if p in out:
                    out[p].append(v)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.flatten(1)
        for layer, norm, gate in zip(self.layers, self.norms, self.gates):
            h = nonlinearity(self.act, gate, norm(layer(h)))
        return self.head(h)


VGG11_CFG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class VGG11(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        sym = spec.symmetry or {}
        c = spec.in_shape[0]
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        self.gates = nn.ModuleList()
        self.pool_after: list[bool] = []
        i = 0
        for item in VGG11_CFG:
            if item == "M":
                self.pool_after[-1] = True
                continue
            out = scaled(item, spec.width)
            self.convs.append(make_conv2d(c, out, 3, 1, 1, spec.bias and spec.norm == "none", sym, i))
            self.norms.append(_norm2d(spec.norm, out, spec.norm_groups))
            self.gates.append(make_gate(out, sym, i))
            self.pool_after.append(False)
            c = out
            i += 1
        self.head = make_linear(c, spec.num_classes, spec.bias, sym, i)
        self.act = ACTIVATIONS[spec.activation]()

    def _blocks(self, x, pre: bool = False):
        for conv, norm, gate, pool in zip(self.convs, self.norms, self.gates, self.pool_after):
            z = norm(conv(x))
            x = nonlinearity(self.act, gate, z)
            yield z if pre else x
            if pool:
                # ceil_mode lets 28x28 inputs (MNIST) pass five poolings: 28-14-7-4-2-1.
                x = F.max_pool2d(x, 2, ceil_mode=True)

    def hidden_features(self, x: torch.Tensor, pre: bool = False) -> list[torch.Tensor]:
        """Post-activations (or with ``pre=True`` the pre-activations, after the norm layer) of every conv."""
        return list(self._blocks(x, pre))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *_, h = self._blocks(x)
        h = F.max_pool2d(h, 2, ceil_mode=True) if self.pool_after[-1] else h
        return self.head(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride, spec: ModelSpec, sym: dict, index: int):
        super().__init__()
        bias = spec.bias and spec.norm == "none"
        self.conv1 = make_conv2d(c_in, c_out, 3, stride, 1, bias, sym, index)
        self.norm1 = _norm2d(spec.norm, c_out, spec.norm_groups)
        self.conv2 = make_conv2d(c_out, c_out, 3, 1, 1, bias, sym, index + 1)
        self.norm2 = _norm2d(spec.norm, c_out, spec.norm_groups)
        self.gate = make_gate(c_out, sym, index)
        self.act = ACTIVATIONS[spec.activation]()
        self.shortcut = None
        if stride != 1 or c_in != c_out:
            # Option B (1x1 conv) shortcut, as in Git Re-Basin's ResNet-20.
            self.shortcut = nn.Sequential(
                make_conv2d(c_in, c_out, 1, stride, 0, bias, sym, index + 2),
                _norm2d(spec.norm, c_out, spec.norm_groups),
            )

    def forward(self, x, features: list | None = None, pre: bool = False):
        z1 = self.norm1(self.conv1(x))
        h = nonlinearity(self.act, self.gate, z1)
        if features is not None:
            features.append(z1 if pre else h)  # block interior
        s = x if self.shortcut is None else self.shortcut(x)
        z2 = self.norm2(self.conv2(h)) + s
        out = self.act(z2)
        if features is not None:
            features.append(z2 if pre else out)  # residual stream after the block
        return out


class ResNet20(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        sym = spec.symmetry or {}
        bias = spec.bias and spec.norm == "none"
        widths = [scaled(c, spec.width) for c in (16, 32, 64)]
        self.stem = make_conv2d(spec.in_shape[0], widths[0], 3, 1, 1, bias, sym, 0)
        self.stem_norm = _norm2d(spec.norm, widths[0], spec.norm_groups)
        self.act = ACTIVATIONS[spec.activation]()
        self.stages = nn.ModuleList()
        c, idx = widths[0], 1
        for s, w in enumerate(widths):
            blocks = nn.ModuleList()
            for b in range(3):
                stride = 2 if (s > 0 and b == 0) else 1
                blocks.append(BasicBlock(c, w, stride, spec, sym, idx))
                c, idx = w, idx + 3
            self.stages.append(blocks)
        self.head = make_linear(c, spec.num_classes, spec.bias, sym, idx)

    def _run(self, x, features, pre: bool = False):
        z = self.stem_norm(self.stem(x))
        x = self.act(z)
        if features is not None:
            features.append(z if pre else x)
        for blocks in self.stages:
            for block in blocks:
                x = block(x, features, pre)
        return x

    def hidden_features(self, x: torch.Tensor, pre: bool = False) -> list[torch.Tensor]:
        """Post-activations of the stem, then of every block's interior and of the residual stream after it
        (19 entries); ``pre=True``: the inputs of those activations (stem and interior: after the norm layer;
        the stream: norm2(conv2(h)) + shortcut)."""
        feats: list[torch.Tensor] = []
        self._run(x, feats, pre)
        return feats

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._run(x, None)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class SumReLU(nn.Module):
    """f(x) = Σ_h act((W_eff x + b)_h): one hidden layer, scalar output (coherence study).

    Width = ``scaled(base_width, width)``; the hidden layer is built by
    ``make_linear(…, index=0)``, so ``model.symmetry`` decides its mask (e.g.
    ``{kind: w_asymmetric, sigma_f: 0, mask_type: bernoulli, mask_density: 0.15}``).
    There is no trainable head: the output is the sum over hidden units.
    """

    def __init__(self, spec: ModelSpec):
        super().__init__()
        if spec.num_classes != 1:
            raise ValueError(f"model.arch=sum_relu has a scalar output; the dataset must be a regression "
                             f"task (num_classes 1), got num_classes={spec.num_classes}")
        d_in = int(math.prod(spec.in_shape))
        hidden = scaled(spec.base_width, spec.width)
        self.layers = nn.ModuleList([make_linear(d_in, hidden, spec.bias, spec.symmetry or {}, 0)])
        self.act = ACTIVATIONS[spec.activation]()

    def hidden_features(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [self.act(self.layers[0](x.flatten(1)))]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.hidden_features(x)[0].sum(1, keepdim=True)


class RepeatChannels(nn.Module):
    """Feeds a C-channel input to a model that takes ``channels`` (grayscale -> RGB: the channel repeated)."""

    def __init__(self, model: nn.Module, channels: int = 3):
        super().__init__()
        self.model = model
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x.expand(-1, self.channels, -1, -1))


_BUILDERS = {"mlp": MLP, "vgg11": VGG11, "resnet20": ResNet20, "sum_relu": SumReLU}


def build_model(spec: ModelSpec) -> nn.Module:
    if is_external(spec.arch):
        model = build_external(spec.arch, spec.factory, spec.kwargs, spec.width_kwargs, spec.width,
                               spec.in_shape, spec.num_classes)
        if needs_rgb(spec.arch, spec.in_shape):
            model = RepeatChannels(model, 3)
        init_weights(model, spec.init)
        model.example_input_shape = tuple(spec.in_shape)  # the derived permutation spec traces on this shape
        model.trace_overrides = dict(spec.trace_overrides or {})
        return model
    if spec.arch not in _BUILDERS:
        raise ValueError(f"model.arch={spec.arch!r} is unknown; allowed: {', '.join(ARCHITECTURES)}")
    if spec.activation not in ACTIVATIONS:
        raise ValueError(f"model.activation={spec.activation!r} is unknown; allowed: {', '.join(ACTIVATIONS)}")
    model = _BUILDERS[spec.arch](spec)
    init_weights(model, spec.init)
    return model


def init_weights(model: nn.Module, init: dict | None) -> None:
    """Redraw weights after construction (module doc); ``init`` = ``model.init`` ({weights, std, bias})."""
    init = dict(init or {"weights": "torch", "bias": "torch"})
    weights, bias = init.get("weights", "torch"), init.get("bias", "torch")
    if weights not in INIT_WEIGHTS:
        raise ValueError(f"model.init.weights={weights!r} is unknown; allowed: {', '.join(INIT_WEIGHTS)}")
    if bias not in INIT_BIASES:
        raise ValueError(f"model.init.bias={bias!r} is unknown; allowed: {', '.join(INIT_BIASES)}")
    with torch.no_grad():
        for m in model.modules():
            if not isinstance(m, (nn.Linear, nn.Conv2d)):
                continue
            fan_in = m.weight[0].numel()
            if weights == "normal":
                m.weight.normal_(0.0, float(init.get("std", 0.05)))
            elif weights == "paper" and isinstance(m, nn.Linear) and is_asymmetric(m):
                m.weight.normal_(0.0, 1.0 / math.sqrt(fan_in))
            if is_asymmetric(m):
                m.weight.mul_(m.mask)  # the trainable part stays zero at fixed positions
            if bias == "zero" and m.bias is not None:
                m.bias.zero_()


def has_batchnorm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (fixed symmetry-breaking offsets are buffers and do not count)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
