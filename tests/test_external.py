"""Models from outside lmcflow (lmcflow.external): the config check builds them before any job and refuses what
cannot run, names the key; the width sweep reaches the builder's own arguments."""
import copy
import math
from pathlib import Path

import pytest
import torch
import yaml

from lmcflow.config import ConfigError
from lmcflow.external import scaled_kwargs
from tests.test_config import check

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = yaml.safe_load((REPO / "examples/any_model.yaml").read_text())


def test_the_example_config_is_valid():
    check(EXAMPLE)


def _with(model: dict, **study):
    cfg = copy.deepcopy(EXAMPLE)
    cfg["studies"] = {"s": {"dataset": "fashion_mnist_5k", "seeds": [0, 1], "model": model, **study}}
    return cfg


BAD = {
    "unknown torchvision model": ({"arch": "torchvision:resnet_nope"}, "no classification model 'resnet_nope'"),
    "kwarg the builder refuses": ({"arch": "torchvision:resnet18", "kwargs": {"width_per_group": 32}},
                                  "BasicBlock only supports"),
    "unknown kwarg": ({"arch": "torchvision:resnet18", "kwargs": {"colour": 1}}, "colour"),
    "factory not importable": ({"arch": "factory", "factory": "no_such_pkg.models:build"}, "no_such_pkg"),
    "factory function missing": ({"arch": "factory", "factory": "examples.user_model.net:nope"}, "no function"),
    "factory without a path": ({"arch": "factory"}, "needs model.factory"),
    "factory key on lmcflow's arch": ({"arch": "mlp", "factory": "examples.user_model.net:build"},
                                      "model.factory is for models from outside lmcflow"),
    "symmetry-breaking layers": ({"arch": "torchvision:resnet18", "symmetry": {"kind": "w_asymmetric"}},
                                 "model.symmetry is for lmcflow's own"),
    "wrong input shape": ({"arch": "torchvision:vit_b_16"}, "does not run on inputs of shape (1, 28, 28)"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_external_models_fail_at_the_config_check(name):
    model, match = BAD[name]
    with pytest.raises(ConfigError, match=match.replace("(", r"\(").replace(")", r"\)")):
        check(_with(model))


def test_mechanism_analyses_are_refused_for_external_models():
    cfg = _with({"arch": "torchvision:resnet18"}, merge={"methods": ["identity"]},
                analysis={"mechanism": {"methods": ["identity"]}})
    with pytest.raises(ConfigError, match="hidden layers"):
        check(cfg)


def test_width_maps_through_the_builders_own_arguments():
    assert scaled_kwargs({"channels": 32, "width_mult": 1.0}, 0.25) == {"channels": 8, "width_mult": 0.25}
    assert scaled_kwargs({"channels": 3}, 0.01) == {"channels": 1}  # at least one unit
    with pytest.raises(ValueError, match="model.width_kwargs.channels"):
        scaled_kwargs({"channels": "wide"}, 1.0)


class RandomShift(torch.nn.Module):
    """Shifts its input by a random number of pixels in train mode: torch.randint, which no seed reaches."""

    def forward(self, x):
        return torch.roll(x, int(torch.randint(0, 3, ())), dims=-1) if self.training else x


def random_net(num_classes: int, in_shape: tuple, op: str = "rrelu") -> torch.nn.Module:
    """A factory for the tests below: a small net with one random op in its training forward."""
    layer = {"rrelu": torch.nn.RReLU(), "randint": RandomShift(), "dropout": torch.nn.Dropout(0.1)}[op]
    n = math.prod(in_shape)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(n, 8), layer, torch.nn.Linear(8, num_classes))


@pytest.mark.parametrize(("op", "aten"), [("rrelu", "rrelu_with_noise"), ("randint", "randint")])
def test_random_ops_no_seed_reaches_are_refused_at_the_config_check(op, aten):
    model = {"arch": "factory", "factory": "tests.test_external:random_net", "kwargs": {"op": op}}
    with pytest.raises(ConfigError, match=rf"studies\.s .*model tests\.test_external:random_net's training "
                                          rf"forward calls random op\(s\) .*{aten}.*turn the op off"):
        check(_with(model))


def test_seeded_random_ops_pass_the_config_check():
    check(_with({"arch": "factory", "factory": "tests.test_external:random_net", "kwargs": {"op": "dropout"}}))
