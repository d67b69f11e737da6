import pytest
import torch

from lmcflow.models import ModelSpec, build_model, count_parameters, scaled


@pytest.mark.parametrize("width", [0.0625, 0.5, 1.0, 2.0])
def test_mlp_width_multiplier(width):
    m = build_model(ModelSpec("mlp", (1, 28, 28), 10, width=width, depth=3))
    hidden = scaled(512, width)
    assert [l.out_features for l in m.layers] == [hidden] * 3
    assert m(torch.randn(5, 1, 28, 28)).shape == (5, 10)
    feats = m.hidden_features(torch.randn(5, 1, 28, 28))
    assert [f.shape for f in feats] == [torch.Size([5, hidden])] * 3
    assert count_parameters(m) == 784 * hidden + hidden + 2 * (hidden * hidden + hidden) + hidden * 10 + 10


def test_mlp_options():
    m = build_model(ModelSpec("mlp", (20,), 4, width=0.25, depth=1, bias=False, norm="layernorm", activation="gelu"))
    assert m.layers[0].bias is None and isinstance(m.norms[0], torch.nn.LayerNorm)
    assert m(torch.randn(3, 20)).shape == (3, 4)


@pytest.mark.parametrize("arch,shape", [("vgg11", (3, 32, 32)), ("vgg11", (1, 28, 28)), ("resnet20", (3, 32, 32))])
@pytest.mark.parametrize("norm", ["batchnorm", "groupnorm"])
def test_conv_nets_shapes(arch, shape, norm):
    m = build_model(ModelSpec(arch, shape, 10, width=0.25, norm=norm))
    assert m(torch.randn(2, *shape)).shape == (2, 10)


def test_conv_width_scales_channels():
    narrow = build_model(ModelSpec("resnet20", (3, 32, 32), 10, width=1, norm="batchnorm"))
    wide = build_model(ModelSpec("resnet20", (3, 32, 32), 10, width=2, norm="batchnorm"))
    assert narrow.stem.out_channels == 16 and wide.stem.out_channels == 32
    assert wide.stages[2][0].conv1.out_channels == 128
    vgg = build_model(ModelSpec("vgg11", (3, 32, 32), 10, width=0.5, norm="batchnorm"))
    assert [c.out_channels for c in vgg.convs] == [32, 64, 128, 128, 256, 256, 256, 256]


def test_unknown_arch_is_named():
    with pytest.raises(ValueError, match="model.arch='transformer'"):
        build_model(ModelSpec("transformer", (3,), 2))
