"""The example's model factory (``model.factory: examples.imported.net:build``): an MLP with BatchNorm and
dropout. Nothing here is lmcflow-specific."""
import math

from torch import nn


def build(num_classes: int, in_shape: tuple, hidden: int = 64) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(), nn.Linear(math.prod(in_shape), hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
        nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, num_classes))
