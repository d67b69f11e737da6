import pytest
import torch

from lmcflow.config import lambda_grid
from lmcflow.evaluation import predict, reset_bn_stats
from lmcflow.merging import evaluate_path, interpolate_state
from lmcflow.models import ModelSpec, build_model


def _pair(spec):
    torch.manual_seed(0)
    a = build_model(spec)
    torch.manual_seed(1)
    b = build_model(spec)
    return a, b


def test_interpolation_endpoints_are_exact():
    spec = ModelSpec("mlp", (20,), 4, width=0.1, depth=2)
    a, b = _pair(spec)
    sd_a, sd_b = a.state_dict(), b.state_dict()
    for lam, ref in ((0.0, a), (1.0, b)):
        m = build_model(spec)
        m.load_state_dict(interpolate_state(sd_a, sd_b, lam))
        x = torch.randn(16, 20)
        assert torch.equal(predict(m, x), predict(ref, x))
        for k, v in m.state_dict().items():
            assert torch.equal(v, ref.state_dict()[k])


def test_interpolation_midpoint_is_average():
    a, b = _pair(ModelSpec("mlp", (20,), 4, width=0.1, depth=2))
    mid = interpolate_state(a.state_dict(), b.state_dict(), 0.5)
    k = "layers.0.weight"
    assert torch.allclose(mid[k], 0.5 * (a.state_dict()[k] + b.state_dict()[k]))
    assert torch.allclose(interpolate_state(a.state_dict(), b.state_dict(), 0.25)[k],
                          0.75 * a.state_dict()[k] + 0.25 * b.state_dict()[k])


def test_lambda_grid():
    assert lambda_grid(11)[5] == 0.5 and lambda_grid(11)[0] == 0 and lambda_grid(11)[-1] == 1
    assert len(lambda_grid(11)) == 11


def test_bn_reset_uses_exact_average():
    m = build_model(ModelSpec("resnet20", (3, 8, 8), 3, width=0.25, norm="batchnorm"))
    x = torch.randn(64, 3, 8, 8) * 3 + 1
    reset_bn_stats(m, x, batch_size=64)
    # One full batch in train mode: the stem BN running mean equals the batch mean of its input.
    with torch.no_grad():
        z = m.stem(x)
    assert torch.allclose(m.stem_norm.running_mean, z.mean(dim=(0, 2, 3)), atol=1e-5)


def test_evaluate_path_rows(small_data):
    spec = ModelSpec("mlp", (20,), 4, width=0.05, depth=1)
    a, b = _pair(spec)
    rows = evaluate_path(build_model(spec), a.state_dict(), b.state_dict(), small_data, [0, 0.5, 1])
    assert len(rows) == 6 and {r["split"] for r in rows} == {"train", "test"}
    for r in rows:
        assert r["beta"] > 0 and 0 < r["calibrated_loss"] < float("inf")
        assert abs(r["error"] - (1 - r["acc"])) < 1e-12
    # the mean logit norm of θ(λ) on each split, from the same outputs as the loss
    for lam, ref in ((0.0, a), (1.0, b)):
        for split, x in (("train", small_data.x["train"]), ("test", small_data.x["test"])):
            want = predict(ref, x).double().norm(dim=1).mean().item()
            got = next(r["logit_norm"] for r in rows if r["lam"] == lam and r["split"] == split)
            assert got == pytest.approx(want, rel=1e-6)


# --------------------------------------------------------------------------- batched λ path
# Measured (CPU, fp32): batched vs per-λ loop differ by ≤ 5e-7 in loss and ≤ 1e-6 in β, accuracy equal.
PATH_TOL = {"loss": 1e-5, "calibrated_loss": 1e-5, "beta": 1e-4, "acc": 0.02, "error": 0.02,  # acc: one example
            "logit_norm": 1e-4}


def _image_data(n=(96, 48, 64), shape=(3, 8, 8), classes=3):
    from lmcflow.data import Dataset

    g = torch.Generator().manual_seed(0)
    x = {s: torch.randn(k, *shape, generator=g) for s, k in zip(("train", "val", "test"), n, strict=True)}
    y = {s: torch.randint(0, classes, (k,), generator=g) for s, k in zip(("train", "val", "test"), n, strict=True)}
    return Dataset(x, y, {"in_shape": list(shape), "num_classes": classes, "task": "classification"})


def _assert_paths_equal(spec, data, max_stack_bytes=None, **kw):
    a, b = _pair(spec)
    loop = evaluate_path(build_model(spec), a.state_dict(), b.state_dict(), data, lambda_grid(5), batched=False, **kw)
    stacked = evaluate_path(build_model(spec), a.state_dict(), b.state_dict(), data, lambda_grid(5), batched=True,
                            max_stack_bytes=max_stack_bytes, **kw)
    assert [(r["lam"], r["split"]) for r in loop] == [(r["lam"], r["split"]) for r in stacked]
    worst = {k: max(abs(r0[k] - r1[k]) for r0, r1 in zip(loop, stacked, strict=True)) for k in PATH_TOL}
    assert all(worst[k] <= tol for k, tol in PATH_TOL.items()), worst
    return worst


def test_batched_path_equals_the_loop_mlp(small_data):
    from lmcflow.merging import first_affine_layer

    worst = _assert_paths_equal(ModelSpec("mlp", (20,), 4, width=0.1, depth=2), small_data)
    asym = ModelSpec("mlp", (20,), 4, width=0.1, depth=2, norm="layernorm",
                     symmetry={"kind": "w_asymmetric", "sigma_f": 1.0, "n_fixed": 0.25})
    worst_asym = _assert_paths_equal(asym, small_data)
    # the first layer's outputs are interpolated only where its masks agree
    a, b = _pair(asym)
    x = small_data.x["test"][:1]
    assert first_affine_layer(a, a.state_dict(), b.state_dict(), x) == ("layers.0", (20,))
    other = build_model(ModelSpec("mlp", (20,), 4, width=0.1, depth=2, norm="layernorm",
                                  symmetry={"kind": "w_asymmetric", "sigma_f": 1.0, "n_fixed": 0.25, "mask_seed": 9}))
    assert first_affine_layer(a, a.state_dict(), other.state_dict(), x) is None
    print(f"\nbatched vs loop, MLP: {worst}; W-asymmetric MLP: {worst_asym}")


def test_batched_path_equals_the_loop_batchnorm_conv_net(monkeypatch):
    from lmcflow import merging
    from lmcflow.merging import bytes_per_lambda, first_affine_layer

    chunks = []
    stacked_outputs = merging._stacked_outputs
    monkeypatch.setattr(merging, "_stacked_outputs", lambda m, a, b, lams, *rest, **kw:
                        chunks.append(len(lams)) or stacked_outputs(m, a, b, lams, *rest, **kw))
    data = _image_data()
    spec = ModelSpec("resnet20", (3, 8, 8), 3, width=0.25, norm="batchnorm")
    worst = _assert_paths_equal(spec, data, bn_reset_size=64)
    # chunks of two λ (and a last one of one) give the same curve
    a, b = _pair(spec)
    _assert_paths_equal(spec, data, max_stack_bytes=2 * bytes_per_lambda(a, data.x["test"][:1]), bn_reset_size=64)
    assert chunks == [5, 2, 2]  # default budget: 5 λ stacked; 2 λ per chunk: 2 + 2 stacked, the last λ by the loop
    assert first_affine_layer(a, a.state_dict(), b.state_dict(), data.x["test"][:1]) == ("stem", (3, 8, 8))
    print(f"\nbatched vs loop, ResNet-20 with BatchNorm reset: {worst}")


def test_lambda_chunk_respects_the_memory_budget():
    from lmcflow.merging import lambda_chunk

    model = build_model(ModelSpec("mlp", (20,), 4, width=0.1, depth=2))
    x = torch.randn(1, 20)
    assert lambda_chunk(model, x, 11) == 11
    assert lambda_chunk(model, x, 11, max_stack_bytes=1) == 1
    per_lambda = sum(t.numel() * 4 for t in model.state_dict().values()) + 3 * 51 * 4096 * 4  # widest layer: 51
    assert lambda_chunk(model, x, 11, max_stack_bytes=3 * per_lambda) == 3


# --------------------------------------------------------------------------- endpoints evaluated once per model
@pytest.mark.parametrize("conv", [False, True])
def test_given_endpoints_equal_the_evaluated_ones(small_data, conv):
    from lmcflow.merging import endpoint_outputs

    if conv:
        data, spec, kw = _image_data(), ModelSpec("resnet20", (3, 8, 8), 3, width=0.25, norm="batchnorm"), \
            {"bn_reset_size": 64}
    else:
        data, spec, kw = small_data, ModelSpec("mlp", (20,), 4, width=0.1, depth=2), {"train_eval_size": 30}
    a, b = _pair(spec)
    ends = {0.0: endpoint_outputs(a, data, **kw), 1.0: endpoint_outputs(b, data, **kw)}
    full = evaluate_path(build_model(spec), a.state_dict(), b.state_dict(), data, lambda_grid(5), **kw)
    given = evaluate_path(build_model(spec), a.state_dict(), b.state_dict(), data, lambda_grid(5), endpoints=ends,
                          **kw)
    assert [(r["lam"], r["split"]) for r in full] == [(r["lam"], r["split"]) for r in given]
    worst = {k: max(abs(r0[k] - r1[k]) for r0, r1 in zip(full, given, strict=True)) for k in PATH_TOL}
    assert all(worst[k] <= tol for k, tol in PATH_TOL.items()), worst


def test_given_endpoints_are_not_evaluated_again(small_data):
    from lmcflow.merging import endpoint_outputs

    spec = ModelSpec("mlp", (20,), 4, width=0.1, depth=2)
    a, b = _pair(spec)
    other = build_model(spec)  # outputs of a third model stand in for A's: the rows at λ = 0 must be its
    ends = {0.0: endpoint_outputs(other, small_data)}
    rows = evaluate_path(build_model(spec), a.state_dict(), b.state_dict(), small_data, lambda_grid(3), endpoints=ends)
    got = next(r["loss"] for r in rows if r["lam"] == 0.0 and r["split"] == "test")
    want = torch.nn.functional.cross_entropy(predict(other, small_data.x["test"]), small_data.y["test"]).item()
    own = torch.nn.functional.cross_entropy(predict(a, small_data.x["test"]), small_data.y["test"]).item()
    assert got == pytest.approx(want, rel=1e-6) and abs(got - own) > 1e-3


def test_a_permutation_that_changes_the_function_is_refused(small_data):
    from lmcflow.alignment import apply_permutation, permutation_spec
    from lmcflow.merging import check_same_function

    spec = ModelSpec("mlp", (20,), 4, width=0.1, depth=2)
    a, b = _pair(spec)
    x = small_data.x["test"]
    spec_b = permutation_spec(b)
    perms = {g: torch.randperm(n, generator=torch.Generator().manual_seed(1)) for g, n in spec_b.sizes.items()}
    permuted = apply_permutation(spec_b, b.state_dict(), perms)
    check_same_function(a, b.state_dict(), permuted, x, "whole permutation")  # the same function: passes
    broken = dict(permuted, **{"layers.0.weight": permuted["layers.0.weight"].flip(0)})  # one layer only
    with pytest.raises(RuntimeError, match="one layer only: the permutation changed model B's function"):
        check_same_function(a, b.state_dict(), broken, x, "one layer only")
