"""torchvision's ResNet-18 (its ``ResNet`` and ``BasicBlock`` classes) at a chosen width.

torchvision's ``resnet18`` has no width argument (its ``BasicBlock`` refuses ``width_per_group`` ≠ 64), so this
factory builds the same network with ``base_width`` channels in the stem and ``base_width × (1, 2, 4, 8)`` in the
four stages (64 at width 1, as torchvision's).
"""
from torch import nn
from torchvision.models.resnet import BasicBlock, ResNet

_STAGE = {64: 1, 128: 2, 256: 4, 512: 8}  # torchvision's stage widths -> multiples of base_width


class WidthResNet(ResNet):
    def __init__(self, base_width: int, num_classes: int, in_channels: int, layers=(2, 2, 2, 2)):
        self._base = base_width
        super().__init__(BasicBlock, list(layers), num_classes=num_classes)
        self.conv1 = nn.Conv2d(in_channels, base_width, kernel_size=7, stride=2, padding=3, bias=False)
        nn.init.kaiming_normal_(self.conv1.weight, mode="fan_out", nonlinearity="relu")
        self.bn1 = nn.BatchNorm2d(base_width)
        self.fc = nn.Linear(8 * base_width * BasicBlock.expansion, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        if planes == 64:
            self.inplanes = self._base  # the stem's output
        return super()._make_layer(block, _STAGE[planes] * self._base, blocks, stride, dilate)


def resnet18(num_classes: int, in_shape: tuple, base_width: int = 64) -> nn.Module:
    """The factory of examples/any_model.yaml (``model.width_kwargs: {base_width: 64}``)."""
    return WidthResNet(base_width, num_classes, in_shape[0])
