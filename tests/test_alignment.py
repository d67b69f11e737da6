"""Permutation specs, apply_permutation and the alignment methods (lmcflow.alignment)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lmcflow.alignment import (
    METHODS,
    activation_matching,
    align,
    apply_permutation,
    identity,
    load_permutation_sets,
    permutation_spec,
    random_permutation,
    save_permutation_sets,
    weight_matching,
    weight_matching_objective,
)
from lmcflow.correlation import feature_correlations
from lmcflow.evaluation import reset_bn_stats
from lmcflow.merging import interpolate_state
from lmcflow.models import ModelSpec, build_model

IN_SHAPE = {"mlp": (1, 6, 6), "vgg11": (3, 16, 16), "resnet20": (3, 12, 12)}

CASES = [
    ("mlp", "none", 0.25), ("mlp", "layernorm", 0.25), ("mlp", "batchnorm", 0.5),
    ("vgg11", "batchnorm", 0.25), ("vgg11", "groupnorm", 0.25),
    ("resnet20", "batchnorm", 0.25), ("resnet20", "groupnorm", 0.5), ("resnet20", "batchnorm", 0.5),
]


def make_model(arch, norm="none", width=0.25, seed=0, norm_groups=1, depth=3):
    torch.manual_seed(seed)
    spec = ModelSpec(arch=arch, in_shape=IN_SHAPE[arch], num_classes=10, width=width, depth=depth,
                     base_width=64, norm=norm, norm_groups=norm_groups)
    model = build_model(spec)
    # Non-trivial norm parameters and running statistics, so a wrongly permuted one shows.
    g = torch.Generator().manual_seed(1000 + seed)
    sd = model.state_dict()
    for k, v in sd.items():
        if not v.is_floating_point() or v.dim() != 1:
            continue
        if k.endswith("running_var"):
            sd[k] = 0.5 + torch.rand(v.shape, generator=g)
        else:
            sd[k] = v + 0.2 * torch.randn(v.shape, generator=g)
    model.load_state_dict(sd)
    return model.eval()


def inputs(arch, n=16, seed=1):
    return torch.randn((n,) + IN_SHAPE[arch], generator=torch.Generator().manual_seed(seed))


def rel_diff(a, b):
    return float((a - b).abs().max() / a.abs().max())


@pytest.mark.parametrize("arch,norm,width", CASES)
def test_random_permutation_preserves_function_and_features(arch, norm, width):
    model = make_model(arch, norm, width)
    spec = permutation_spec(model)
    perms, _ = random_permutation(spec, seed=3)
    assert any(not torch.equal(p, torch.arange(len(p))) for p in perms.values())
    sd = model.state_dict()
    sd_p = apply_permutation(spec, sd, perms)
    assert any(not torch.equal(sd[k], sd_p[k]) for k in sd)
    permuted = make_model(arch, norm, width, seed=9)
    permuted.load_state_dict(sd_p)
    x = inputs(arch)
    with torch.no_grad():
        out, out_p = model(x), permuted(x)
        assert rel_diff(out, out_p) <= 1e-5
        # feature_indices: channel i of the permuted model is channel perms[g][i] of the original
        fa, fp = model.hidden_features(x), permuted.hidden_features(x)
    assert len(fa) == sum(len(v) for v in spec.feature_indices.values())
    for g, idx in spec.feature_indices.items():
        assert spec.feature_index[g] == idx[-1]
        for j in idx:
            assert fa[j].shape[1] == spec.sizes[g]
            assert rel_diff(fa[j][:, perms[g]], fp[j]) <= 1e-5


def test_broken_spec_changes_function():
    """Control: forgetting the input axis of one layer must break function preservation."""
    model = make_model("resnet20", "batchnorm", 0.25)
    spec = permutation_spec(model)
    key = "stages.1.0.shortcut.0.weight"
    assert spec.axes[key] == ("stage1", "stage0", None, None)
    spec.axes[key] = ("stage1", None, None, None)
    perms, _ = random_permutation(spec, seed=3)
    broken = make_model("resnet20", "batchnorm", 0.25)
    broken.load_state_dict(apply_permutation(spec, model.state_dict(), perms))
    x = inputs("resnet20")
    with torch.no_grad():
        assert rel_diff(model(x), broken(x)) > 1e-3


def test_mlp_group_to_feature_mapping():
    spec = permutation_spec(make_model("mlp", "batchnorm", 0.25))
    assert spec.groups == ("hidden0", "hidden1", "hidden2")
    assert spec.feature_index == {"hidden0": 0, "hidden1": 1, "hidden2": 2}
    assert spec.axes["layers.1.weight"] == ("hidden1", "hidden0")
    assert spec.axes["layers.0.weight"] == ("hidden0", None)
    assert spec.axes["head.weight"] == (None, "hidden2")
    assert spec.axes["norms.2.running_var"] == ("hidden2",)
    assert spec.axes["norms.2.num_batches_tracked"] == ()
    assert "norms.2.running_var" not in spec.parameters and "layers.0.weight" in spec.parameters


def test_resnet_group_to_feature_mapping():
    spec = permutation_spec(make_model("resnet20", "batchnorm", 0.25))
    assert len(spec.groups) == 3 + 9
    assert spec.feature_indices["stage0"] == (0, 2, 4, 6)
    assert spec.feature_indices["stage1"] == (8, 10, 12)
    assert spec.feature_index["stage2"] == 18
    assert spec.feature_index["stage1.block0"] == 7
    assert spec.axes["stages.0.1.conv2.weight"] == ("stage0", "stage0.block1", None, None)
    assert spec.axes["stem.weight"] == ("stage0", None, None, None)
    assert spec.axes["head.weight"] == (None, "stage2")


def test_groupnorm_with_several_groups_is_refused():
    model = make_model("vgg11", "groupnorm", 0.25, norm_groups=4)
    with pytest.raises(ValueError, match="GroupNorm"):
        permutation_spec(model)


def test_unknown_and_weight_shaped_entries():
    model = make_model("mlp", "none", 0.25)
    # A symmetry-breaking buffer with the weight's shape gets the weight's axes.
    model.layers[1].register_buffer("offset", torch.randn_like(model.layers[1].weight))
    spec = permutation_spec(model)
    assert spec.axes["layers.1.offset"] == spec.axes["layers.1.weight"] == ("hidden1", "hidden0")
    # Anything else is refused rather than silently left unpermuted…
    model.layers[1].register_buffer("scale", torch.ones(3))
    with pytest.raises(ValueError, match="layers.1.scale"):
        permutation_spec(model)
    model2 = make_model("mlp", "none", 0.25)
    model2.register_buffer("stray", torch.ones(5))
    with pytest.raises(ValueError, match="stray"):
        permutation_spec(model2)
    # …unless declared.
    assert permutation_spec(model2, extra_axes={"stray": (None,)}).axes["stray"] == (None,)


def test_apply_permutation_checks_perms():
    spec = permutation_spec(make_model("mlp", "none", 0.25))
    perms, _ = identity(spec)
    sd = make_model("mlp", "none", 0.25).state_dict()
    bad = dict(perms, hidden0=torch.zeros(spec.sizes["hidden0"], dtype=torch.long))
    with pytest.raises(ValueError, match="not a permutation"):
        apply_permutation(spec, sd, bad)
    with pytest.raises(KeyError):
        apply_permutation(spec, sd, {k: v for k, v in perms.items() if k != "hidden1"})
    out = apply_permutation(spec, sd, perms)
    assert all(torch.equal(out[k], sd[k]) for k in sd)


def _barrier(model, sd_a, sd_b, x, y):
    losses = []
    for lam in (0.0, 0.5, 1.0):
        model.load_state_dict(interpolate_state(sd_a, sd_b, lam))
        with torch.no_grad():
            losses.append(F.cross_entropy(model(x), y).item())
    return losses[1] - 0.5 * (losses[0] + losses[2])


@pytest.mark.parametrize("arch,norm,width", [("mlp", "none", 0.5), ("vgg11", "batchnorm", 0.25),
                                             ("resnet20", "batchnorm", 0.5)])
def test_weight_matching_recovers_planted_permutation(arch, norm, width):
    model = make_model(arch, norm, width)
    spec = permutation_spec(model)
    sd_a = model.state_dict()
    truth, _ = random_permutation(spec, seed=5)
    sd_b = apply_permutation(spec, sd_a, truth)
    perms, info = weight_matching(spec, sd_a, sd_b, seed=0)
    sd_aligned = apply_permutation(spec, sd_b, perms)
    assert all(torch.equal(sd_aligned[k], sd_a[k]) for k in sd_a)
    hist = info["objective_history"]
    assert all(b >= a for a, b in zip(hist, hist[1:]))
    assert hist[-1] == pytest.approx(sum(float(sd_a[k].double().pow(2).sum()) for k in spec.parameters))
    assert hist[0] < hist[-1]
    x = inputs(arch, 32)
    y = torch.randint(0, 10, (32,), generator=torch.Generator().manual_seed(2))
    assert _barrier(model, sd_a, sd_aligned, x, y) == pytest.approx(0.0, abs=1e-6)
    assert abs(_barrier(model, sd_a, sd_b, x, y)) > 1e-4  # control: unaligned B is not A


def test_weight_matching_objective_monotone_and_seeded():
    model_a = make_model("resnet20", "batchnorm", 0.5, seed=0)
    model_b = make_model("resnet20", "batchnorm", 0.5, seed=1)
    spec = permutation_spec(model_a)
    sd_a, sd_b = model_a.state_dict(), model_b.state_dict()
    perms, info = weight_matching(spec, sd_a, sd_b, seed=0)
    hist = info["objective_history"]
    assert info["iterations"] == len(hist) - 1 >= 2
    assert all(b >= a for a, b in zip(hist, hist[1:])), hist
    assert hist[-1] > hist[0]
    assert info["objective"] == pytest.approx(weight_matching_objective(spec, sd_a, sd_b, perms), rel=1e-9)
    perms2, info2 = weight_matching(spec, sd_a, sd_b, seed=0)
    assert all(torch.equal(perms[g], perms2[g]) for g in perms)
    assert info2["objective_history"] == hist
    _, info3 = weight_matching(spec, sd_a, sd_b, max_iter=1, seed=0)
    assert info3["iterations"] == 1 and len(info3["objective_history"]) == 2


@pytest.mark.parametrize("arch,norm,width", [("mlp", "layernorm", 0.5), ("resnet20", "batchnorm", 0.5)])
def test_activation_matching_recovers_planted_permutation(arch, norm, width):
    model = make_model(arch, norm, width)
    x = inputs(arch, 256)
    # Running statistics that match the data (as after training): with arbitrary ones,
    # whole channels of a random-init ResNet are dead, and dead units cannot be matched.
    reset_bn_stats(model, x)
    spec = permutation_spec(model)
    sd_a = model.state_dict()
    truth, _ = random_permutation(spec, seed=5)
    model_b = make_model(arch, norm, width, seed=7)
    model_b.load_state_dict(apply_permutation(spec, sd_a, truth))
    perms, info = activation_matching(model, model_b, spec, x, batch_size=128)
    assert all(torch.equal(perms[g], truth[g].argsort()) for g in perms)
    sd_aligned = apply_permutation(spec, model_b.state_dict(), perms)
    assert all(torch.equal(sd_aligned[k], sd_a[k]) for k in sd_a)
    assert info["objective"] == pytest.approx(1.0, abs=1e-5)


def test_align_dispatch_and_independent_models():
    model_a, model_b = make_model("mlp", "none", 0.5, seed=0), make_model("mlp", "none", 0.5, seed=1)
    x = inputs("mlp", 256)
    spec = permutation_spec(model_b)
    results = {}
    for method in METHODS:
        perms, info = align(method, model_a, model_b, x, seed=0)
        assert set(perms) == set(spec.groups)
        assert {"objective", "iterations", "seconds"} <= set(info)
        results[method] = (perms, info)
    assert all(torch.equal(p, torch.arange(len(p))) for p in results["identity"][0].values())
    sd_a, sd_b = model_a.state_dict(), model_b.state_dict()
    # Matching beats no matching on its own objective for two independent models.
    wm = results["weight_matching"][1]
    start = weight_matching_objective(spec, sd_a, sd_b, identity(spec)[0])
    assert wm["objective"] > start == wm["objective_history"][0]
    corrs = feature_correlations(model_a, model_b, x)
    diag = torch.cat([c.diagonal() for c in corrs]).mean().item()
    assert results["activation_matching"][1]["objective"] > diag + 0.1
    with pytest.raises(ValueError, match="unknown"):
        align("git_rebasin", model_a, model_b, x)
    with pytest.raises(ValueError, match="different"):
        align("identity", model_a, make_model("mlp", "none", 0.25))


def test_save_load_permutation_sets(tmp_path):
    spec = permutation_spec(make_model("resnet20", "batchnorm", 0.25))
    perms, _ = random_permutation(spec, seed=2)
    other, _ = random_permutation(spec, seed=5)
    info = {"method": "random_permutation", "dense_form": False}
    digest = save_permutation_sets(tmp_path / "perm.safetensors", {(0, 1): perms, (0, 12): other}, info)
    sets, info2 = load_permutation_sets(tmp_path / "perm.safetensors", expected_sha256=digest)
    assert info2 == {**info, "pairs": [[0, 1], [0, 12]]}
    assert set(sets) == {(0, 1), (0, 12)}
    back = sets[(0, 1)]
    assert set(back) == set(perms) and all(torch.equal(back[g], perms[g]) for g in perms)
    assert all(torch.equal(sets[(0, 12)][g], other[g]) for g in other)
    assert random_permutation(spec, seed=2)[0]["stage1"].tolist() == perms["stage1"].tolist()
    assert random_permutation(spec, seed=3)[0]["stage2"].tolist() != perms["stage2"].tolist()


@pytest.mark.parametrize("arch,norm,width", [("mlp", "none", 1.0), ("resnet20", "batchnorm", 0.5)])
def test_weight_matching_reproduces_the_uncached_coordinate_descent(arch, norm, width):
    """The cached cost terms, their row updates, the skipped no-op steps and the objective read from the cost
    give the result of the plain algorithm (every cost recomputed, J summed directly) on independent models."""
    from tests.reference_alignment import reference_weight_matching

    model_a, model_b = make_model(arch, norm, width, seed=0), make_model(arch, norm, width, seed=1)
    spec = permutation_spec(model_a)
    sd_a, sd_b = model_a.state_dict(), model_b.state_dict()
    perms, info = weight_matching(spec, sd_a, sd_b, seed=3)
    ref_perms, ref_history = reference_weight_matching(spec, sd_a, sd_b, seed=3)
    assert info["iterations"] == len(ref_history) - 1 >= 3
    assert info["objective_history"] == pytest.approx(ref_history, rel=1e-9)
    assert info["objective"] == pytest.approx(weight_matching_objective(spec, sd_a, sd_b, perms), rel=1e-9)
    assert all(torch.equal(perms[g], ref_perms[g]) for g in perms)
    assert info["skipped_steps"] >= 1  # the last sweep's no-op steps were recognised


def test_forward_start_recovers_a_planted_permutation_where_the_identity_start_stops_short():
    """torchvision's mobilenet_v3_small at its fan-out init: its first conv's weights are small beside its 1×1
    convs', so from the identity the still-unaligned terms outweigh the exact ones and coordinate descent stops in a
    local optimum far below the planted permutation's objective; the forward start recovers every unit."""
    torch.manual_seed(0)
    model = build_model(ModelSpec(arch="torchvision:mobilenet_v3_small", in_shape=(3, 32, 32), num_classes=10)).eval()
    spec = permutation_spec(model)
    sd_a = model.state_dict()
    planted, _ = random_permutation(spec, seed=1)
    g = torch.Generator().manual_seed(2)
    sd_b = {k: v + 0.01 * v.std() * torch.randn(v.shape, generator=g) if v.is_floating_point() and v.numel() > 1
            else v for k, v in apply_permutation(spec, sd_a, planted).items()}
    truth = {grp: torch.argsort(p) for grp, p in planted.items()}
    j_truth = weight_matching_objective(spec, sd_a, sd_b, truth)
    units = sum(len(p) for p in truth.values())

    def recovered(perms):
        return sum(int((perms[grp] == truth[grp]).sum()) for grp in truth) / units

    from_identity, info_i = weight_matching(spec, sd_a, sd_b, seed=0)
    assert recovered(from_identity) < 0.5 and info_i["objective"] < 0.9 * j_truth
    forward, info_f = weight_matching(spec, sd_a, sd_b, seed=0, init="forward")
    assert recovered(forward) == 1.0 and info_f["objective"] == pytest.approx(j_truth, rel=1e-9)
    with pytest.raises(ValueError, match="weight matching init 'backward' is unknown"):
        weight_matching(spec, sd_a, sd_b, init="backward")
