"""N-way merging (lmcflow.merge_many): permuted copies merge back, MergeMany with N = 2 is pairwise matching."""
from __future__ import annotations

import copy

import pytest
import torch

from lmcflow.alignment import (
    apply_permutation,
    permutation_spec,
    random_permutation,
    weight_matching,
    weight_matching_objective,
)
from lmcflow.evaluation import predict
from lmcflow.merge_many import align_many, average_states, merge_many_weight_matching, merge_scores
from lmcflow.models import ModelSpec, build_model

SPEC = ModelSpec("mlp", (1, 8, 8), 5, width=0.1, depth=3)


def _model(seed):
    torch.manual_seed(seed)
    return build_model(SPEC).eval()


@pytest.mark.parametrize("method", ["weight_matching", "activation_matching"])
def test_permuted_copies_of_one_model_merge_back_to_it(method):
    base = _model(0)
    spec = permutation_spec(base)
    copies = [base]
    for i in range(1, 4):
        m = copy.deepcopy(base)
        m.load_state_dict(apply_permutation(spec, base.state_dict(), random_permutation(spec, 100 + i)[0]))
        copies.append(m)
    x = torch.randn(500, *SPEC.in_shape, generator=torch.Generator().manual_seed(1))
    perms, info = align_many(method, spec, copies, x, seed=3)
    assert info["converged"]
    merged = average_states([apply_permutation(spec, m.state_dict(), p) for m, p in zip(copies, perms, strict=True)])
    net = copy.deepcopy(base)
    net.load_state_dict(merged)
    ref = predict(base, x)
    assert (predict(net, x) - ref).abs().max() <= 1e-5 * max(1.0, float(ref.abs().max()))
    # barrier 0: the merged model scores what every endpoint does
    y = ref.argmax(1)
    outs = {"train": ref, "test": ref, "val": ref}
    row = merge_scores({"train": predict(net, x), "test": predict(net, x), "val": predict(net, x)},
                       [outs] * len(copies), {"train": y, "test": y, "val": y})[0]
    assert abs(row["merged_test_loss"] - row["endpoint_test_loss"]) < 1e-5
    assert row["merged_test_error"] == row["endpoint_test_error"] == 0.0
    # the plain average of the permuted copies is not that model
    plain = copy.deepcopy(base)
    plain.load_state_dict(average_states([m.state_dict() for m in copies]))
    assert (predict(plain, x) - ref).abs().max() > 1e-2


def test_merge_many_with_two_models_is_pairwise_weight_matching():
    a, b = _model(0), _model(1)
    spec = permutation_spec(a)
    many, info = merge_many_weight_matching(spec, [a.state_dict(), b.state_dict()], seed=7)
    pair, _ = weight_matching(spec, a.state_dict(), b.state_dict(), seed=7)
    assert info["converged"] and info["rounds"] <= 2
    assert all(torch.equal(many[0][g], torch.arange(n)) for g, n in spec.sizes.items())
    assert all(torch.equal(many[1][g], pair[g]) for g in spec.groups)
    assert any(not torch.equal(pair[g], torch.arange(len(pair[g]))) for g in spec.groups)


def test_merge_many_reaches_a_fixed_point_on_distinct_models():
    models = [_model(s) for s in range(4)]
    spec = permutation_spec(models[0])
    perms, info = merge_many_weight_matching(spec, [m.state_dict() for m in models], seed=0)
    assert info["converged"]
    # at the fixed point weight matching finds no permutation of a model that matches the others' average better
    aligned = [apply_permutation(spec, m.state_dict(), p) for m, p in zip(models, perms, strict=True)]
    for i in range(1, 4):
        others = average_states([aligned[j] for j in range(4) if j != i])
        again, _ = weight_matching(spec, others, models[i].state_dict(), seed=0)
        now = weight_matching_objective(spec, others, models[i].state_dict(), perms[i])
        assert weight_matching_objective(spec, others, models[i].state_dict(), again) <= now * (1 + 1e-12)
        unmatched = {g: torch.arange(n) for g, n in spec.sizes.items()}
        assert weight_matching_objective(spec, others, models[i].state_dict(), unmatched) < now


def test_the_ensemble_is_the_mean_of_the_logits():
    torch.manual_seed(0)
    y = torch.randint(0, 3, (50,))
    outs = [{s: torch.randn(50, 3) for s in ("train", "test", "val")} for _ in range(3)]
    row = merge_scores(outs[0], outs, {"train": y, "test": y, "val": y})[0]
    ens = torch.stack([o["test"] for o in outs]).mean(0)
    assert row["ensemble_test_error"] == pytest.approx(float((ens.argmax(1) != y).float().mean()))
    assert row["endpoint_test_error"] == pytest.approx(
        sum(float((o["test"].argmax(1) != y).float().mean()) for o in outs) / 3)
