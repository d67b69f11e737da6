"""A user's own model, as lmcflow sees it: any ``torch.nn.Module`` that a factory function returns.

lmcflow derives its permutation spec from the traced graph (residual add, squeeze-and-excitation gate, depthwise
conv, GroupNorm with one group, pooling, flatten) and proves it before aligning; nothing here is lmcflow-specific.
"""
import torch
from torch import nn


class GatedBlock(nn.Module):
    """1×1 conv up → norm → ReLU → depthwise conv → 1×1 conv down → channel gate (squeeze-and-excitation), added
    to the residual stream."""

    def __init__(self, channels: int):
        super().__init__()
        self.expand = nn.Conv2d(channels, 2 * channels, 1, bias=False)
        self.norm = nn.GroupNorm(1, 2 * channels)
        self.depthwise = nn.Conv2d(2 * channels, 2 * channels, 3, padding=1, groups=2 * channels)
        self.project = nn.Conv2d(2 * channels, channels, 1)
        self.squeeze = nn.Linear(channels, max(1, channels // 4))
        self.excite = nn.Linear(max(1, channels // 4), channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.project(self.depthwise(torch.relu(self.norm(self.expand(x)))))
        gate = torch.sigmoid(self.excite(torch.relu(self.squeeze(h.mean(dim=(2, 3))))))
        return x + h * gate[:, :, None, None]


class GatedNet(nn.Module):
    def __init__(self, in_channels: int, channels: int, blocks: int, num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_channels, channels, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(channels), nn.ReLU(), nn.MaxPool2d(2))
        self.stage1 = nn.Sequential(*[GatedBlock(channels) for _ in range(blocks)])
        self.down = nn.Sequential(nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1, bias=False),
                                  nn.BatchNorm2d(2 * channels), nn.ReLU())
        self.stage2 = nn.Sequential(*[GatedBlock(2 * channels) for _ in range(blocks)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.hidden = nn.Linear(2 * channels, 4 * channels)
        self.head = nn.Linear(4 * channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(nn.functional.gelu(self.hidden(self.pool(h).flatten(1))))


def build(num_classes: int, in_shape: tuple, channels: int = 32, blocks: int = 1) -> nn.Module:
    """The factory of examples/any_model.yaml (``model.factory: examples.user_model.net:build``); the width sweep
    scales ``channels`` (``model.width_kwargs: {channels: 32}``)."""
    return GatedNet(in_shape[0], channels, blocks, num_classes)
