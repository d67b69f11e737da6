"""Derive or refuse, never crash: every classification builder of torchvision.models either derives a spec the
proof accepts or is refused with lmcflow's message naming each node, its module path and the override; the same
for recurrent layers, weight and spectral norm (both APIs), shared weights, functional ops in a model's own
forward and unknown modules. The builders over 12 M parameters (``heavy``, tests/spec_sweep.py) are swept by
tests/test_spec_sweep_heavy.py: building them and the proof's float64 copy take seconds to a minute each on one
core (docs/spec-sweep.md), so CI sweeps the smallest of each structure there."""
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrizations, spectral_norm, weight_norm

from lmcflow.alignment.derive import derived_spec
from lmcflow.alignment.graph_axes import UnsupportedGraph
from tests.spec_sweep import builders, heavy, recorded_structure, sweep_one


def _check_refusal(msg: str) -> None:
    nodes = [line for line in msg.splitlines() if line.startswith("  ") and ": module " in line]
    if "has no group" in msg or "ties two of its axes" in msg:
        assert "fixed" in msg
        return
    assert nodes, msg
    for line in nodes:  # node name, module path (or the model's own forward), op, and the override
        assert re.match(r"  \S+: module \S+.*; override: \{'[^']+': 'fixed'\}", line), line


def check_swept(name: str) -> None:
    """``sweep_one(name)``: a spec the proof accepts, or lmcflow's refusal naming each node and its override; any
    other exception fails the test. The builder is built of what tests/data/spec_sweep_structure.json records,
    from which the heavy builders in CI are picked."""
    row = sweep_one(name)
    assert row["structure"] == recorded_structure()[name], \
        f"{name} is built of other modules than recorded: run benchmarks/bench_spec_sweep.py --structure"
    if row["status"] == "derived":
        assert row["groups"] > 0 and row["residual"] < 1e-8 and 0 < row["coverage"] <= 1
    else:
        _check_refusal(row["message"])


@pytest.mark.parametrize("name", [n for n in builders() if not heavy(n)])
def test_every_small_torchvision_classifier_derives_a_proven_spec_or_is_refused(name):
    check_swept(name)


class _LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.rnn, self.head = nn.Linear(6, 8), nn.LSTM(8, 8, batch_first=True), nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.rnn(self.fc(x))[0].mean(1))


class _Normed(nn.Module):  # fc2's weight is normalised; inp -> fc1 stays a group around it
    def __init__(self, how, api):
        super().__init__()
        self.inp, self.fc1, self.fc2, self.head = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        if api == "parametrization":
            getattr(parametrizations, how)(self.fc2)
        else:
            self.fc2 = {"weight_norm": weight_norm, "spectral_norm": spectral_norm}[how](self.fc2)

    def forward(self, x):
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(torch.relu(self.inp(x)))))))


class _Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.fc1, self.fc2, self.head = nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 3)
        self.fc2.weight = self.fc1.weight

    def forward(self, x):
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(torch.relu(self.inp(x)))))))


class _Functional(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.d, self.head = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), nn.Linear(8, 3)

    def forward(self, x):
        h = F.interpolate(torch.relu(self.c(x)), scale_factor=2.0)
        return self.head(torch.cumsum(torch.relu(self.d(h)), dim=2).mean((2, 3)))


def test_recurrent_layers_are_refused_and_an_override_without_groups_is_a_refusal_too():
    with pytest.raises(UnsupportedGraph, match=r"rnn: module rnn, call_module torch.nn.modules.rnn.LSTM; "
                                               r"override: \{'rnn': 'fixed'\}"):
        derived_spec(_LSTMNet(), torch.randn(4, 5, 6))
    with pytest.raises(UnsupportedGraph, match="has no group"):
        derived_spec(_LSTMNet(), torch.randn(4, 5, 6), overrides={"rnn": "fixed"})


@pytest.mark.parametrize("how", ["weight_norm", "spectral_norm"])
@pytest.mark.parametrize("api", ["hook", "parametrization"])
def test_weight_and_spectral_norm_are_refused_naming_their_tensors(how, api):
    model = _Normed(how, api)
    with pytest.raises(UnsupportedGraph) as err:
        derived_spec(model, torch.randn(4, 6))
    msg = str(err.value)
    assert "fc2: module fc2" in msg and "override: {'fc2': 'fixed'}" in msg and "remove" in msg
    assert ("parametrization" if api == "parametrization" else "forward hook") in msg
    if api == "hook":  # its computed weight cannot be copied for the proof
        with pytest.raises(UnsupportedGraph, match="parametrizations"):
            derived_spec(model, torch.randn(4, 6), overrides={"fc2": "fixed"})
        return
    spec = derived_spec(model, torch.randn(4, 6), overrides={"fc2": "fixed"})  # derivable around it
    assert spec.groups and all(a is None for k, ax in spec.axes.items() if k.startswith("fc2.") for a in ax)


def test_shared_weights_are_permuted_as_one_tensor_or_refused_pointing_at_it():
    with pytest.raises(UnsupportedGraph, match=r"fc1.weight is one tensor shared by \['fc1.weight', 'fc2.weight'\]"):
        derived_spec(_Shared(), torch.randn(4, 6))


def test_functional_ops_in_the_models_own_forward_are_named_with_an_override_by_node():
    with pytest.raises(UnsupportedGraph) as err:
        derived_spec(_Functional(), torch.randn(4, 3, 8, 8))
    msg = str(err.value)
    assert "cumsum: module _Functional.forward (the model's own), call_function" in msg
    assert "override: {'cumsum': 'fixed'} (by node name)" in msg and "interpolate" not in msg  # interpolate: a rule
    spec = derived_spec(_Functional(), torch.randn(4, 3, 8, 8), overrides={"cumsum": "fixed"})
    assert spec.groups == ("c",)


def test_unknown_modules_are_refused_with_their_path_and_override():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.odd, self.head = nn.Linear(6, 8), nn.Bilinear(8, 8, 8), nn.Linear(8, 3)

        def forward(self, x):
            h = self.fc(x)
            return self.head(self.odd(h, h))

    with pytest.raises(UnsupportedGraph, match=r"odd: module odd, call_module torch.nn.modules.linear.Bilinear; "
                                               r"override: \{'odd': 'fixed'\}"):
        derived_spec(Odd(), torch.randn(4, 6))
