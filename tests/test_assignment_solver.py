"""Weight matching's assignment step (``lmcflow.alignment.methods._Assignment``): the lapjv solver (float32,
warm-started) gives scipy's assignments on the cost matrices of a trained pair, so the sweeps give the same
permutations and the same objective bits."""
from __future__ import annotations

import pytest
import torch

from lmcflow.alignment import methods as wm_methods
from lmcflow.alignment import permutation_spec, weight_matching
from lmcflow.checkpoints import init_model
from lmcflow.data import Dataset, load_dataset
from lmcflow.models import ModelSpec
from lmcflow.training import train

SPEC = ModelSpec("mlp", (1, 28, 28), 10, width=0.25, depth=2, base_width=512)  # 128 hidden units per layer
CFG = dict(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=1e-3, epochs=2, batch_size=64,
           schedule="cosine", warmup_epochs=0, augment="none", precision="fp32", checkpoint_every=1)


@pytest.fixture(scope="module")
def trained_pair(fmnist_path):
    """Two MLPs trained from different seeds on 4096 Fashion-MNIST images."""
    full = load_dataset(fmnist_path)
    data = Dataset({s: full.x[s][:4096] for s in full.x}, {s: full.y[s][:4096] for s in full.y}, full.meta)
    models = []
    for seed in (0, 1):
        m = init_model(SPEC, seed=seed)
        train(m, data, CFG, seed=seed, device=torch.device("cpu"))
        models.append(m.eval())
    return [m.state_dict() for m in models], permutation_spec(models[0])


@pytest.mark.fmnist
def test_lapjv_gives_scipys_assignments_and_weight_matching(trained_pair, monkeypatch):
    (sd_a, sd_b), spec = trained_pair
    costs = []
    scipy_step = wm_methods._Assignment.__call__

    def recording(self, grp, cost):  # records each sweep step's cost matrix, then solves it as asked
        costs.append((grp, cost.clone()))
        return scipy_step(self, grp, cost)

    monkeypatch.setattr(wm_methods._Assignment, "__call__", recording)
    ref, ref_info = weight_matching(spec, sd_a, sd_b, seed=0, solver="scipy")
    monkeypatch.undo()
    assert len(costs) >= 4 and ref_info["iterations"] >= 3
    scipy = wm_methods._Assignment("scipy")
    warm = wm_methods._Assignment("lapjv")  # one instance across the steps: warm-started per group
    for i, (grp, cost) in enumerate(costs):
        expected = scipy(grp, cost)
        assert torch.equal(wm_methods._Assignment("lapjv")(grp, cost), expected), (i, grp)  # cold
        assert torch.equal(warm(grp, cost), expected), (i, grp)
    assert set(warm.duals) == {g for g, _ in costs}
    perms, info = weight_matching(spec, sd_a, sd_b, seed=0)  # the default solver: lapjv
    assert all(torch.equal(perms[g], ref[g]) for g in ref)
    assert info["objective_history"] == ref_info["objective_history"]
    assert info["iterations"] == ref_info["iterations"]


def test_solver_is_checked():
    model = init_model(ModelSpec("mlp", (4,), 3, width=0.1, depth=2), seed=0)
    spec, sd = permutation_spec(model), model.state_dict()
    with pytest.raises(ValueError, match="weight matching solver 'hungarian' is unknown; allowed: lapjv, scipy"):
        weight_matching(spec, sd, sd, solver="hungarian")
    perms, _ = weight_matching(spec, sd, sd, solver="lapjv")
    assert all(torch.equal(p, torch.arange(len(p))) for p in perms.values())
