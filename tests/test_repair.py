"""REPAIR (lmcflow.repair): the repaired model's tracked statistics, folding, endpoints, BatchNorm nets."""
from __future__ import annotations

import copy

import pytest
import torch

from lmcflow.alignment import apply_permutation, permutation_spec, weight_matching
from lmcflow.evaluation import predict, reset_bn_stats
from lmcflow.merging import interpolate_state
from lmcflow.models import ModelSpec, build_model
from lmcflow.repair import (
    RepairError,
    channel_stats,
    endpoint_stats,
    interpolated_goal,
    repair_plan,
    repair_state,
    with_correction_layers,
)
from tests.test_align_jobs import data_path  # noqa: F401  (fixture)

MLP = ModelSpec("mlp", (1, 8, 8), 5, width=0.1, depth=3)
VGG = ModelSpec("vgg11", (1, 16, 16), 5, width=0.125)


def _pair(spec: ModelSpec, scale_gamma: bool = False):
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        m = build_model(spec)
        if scale_gamma:  # trained-looking BatchNorm / LayerNorm affines: positive γ, nonzero β
            with torch.no_grad():
                for mod in m.modules():
                    if isinstance(mod, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
                        mod.weight.uniform_(0.5, 1.5)
                        mod.bias.normal_(0, 0.3)
        models.append(m.eval())
    return models


def _x(spec: ModelSpec, n=300, seed=5):
    return torch.randn((n, *spec.in_shape), generator=torch.Generator().manual_seed(seed))


def _aligned(a, b):
    spec = permutation_spec(a)
    perms, _ = weight_matching(spec, a.state_dict(), b.state_dict(), seed=0)
    return apply_permutation(spec, b.state_dict(), perms)


def _close(value, goal_mean, goal_std, what):
    mean, std = value
    scale = goal_std.clamp_min(1e-6)
    assert torch.all((std - goal_std).abs() <= 1e-3 * scale), f"{what}: std off the goal"
    assert torch.all((mean - goal_mean).abs() <= 1e-3 * scale), f"{what}: mean off the goal"


@pytest.mark.parametrize("spec", [MLP, VGG, ModelSpec("mlp", (1, 8, 8), 5, width=0.1, depth=2, norm="layernorm")],
                         ids=["mlp", "vgg11", "mlp-layernorm"])
def test_repaired_statistics_equal_the_interpolated_endpoint_statistics(spec):
    a, b = _pair(spec, scale_gamma=True)
    sd_a, sd_b = a.state_dict(), _aligned(a, b)
    x = _x(spec)
    plan = repair_plan(a, x_example=x)
    assert [g for g, _, _ in plan] == list(permutation_spec(a).feature_index)
    b.load_state_dict(sd_b)
    stats_a, stats_b = endpoint_stats(a, x, plan), endpoint_stats(b, x, plan)
    net = copy.deepcopy(a)
    for lam in (0.25, 0.5):
        goal = interpolated_goal(stats_a, stats_b, lam)
        plain = copy.deepcopy(a)
        plain.load_state_dict(interpolate_state(sd_a, sd_b, lam))
        collapsed = channel_stats(plain, plan[-1][1], x)[1]
        repaired = repair_state(net, interpolate_state(sd_a, sd_b, lam), goal, x, plan)
        net.load_state_dict(repaired)
        for group, index, _ in plan:
            _close(channel_stats(net, index, x), *goal[group], f"λ={lam} {group}")
        # the correction did something: the plain average's last layer had another spread
        assert not torch.allclose(collapsed, goal[plan[-1][0]][1], rtol=1e-2)
        assert repaired.keys() == sd_a.keys()  # the original architecture


@pytest.mark.parametrize("spec", [MLP, VGG], ids=["mlp", "vgg11"])
def test_folded_model_equals_the_model_with_correction_layers(spec):
    a, b = _pair(spec)
    sd_a, sd_b = a.state_dict(), _aligned(a, b)
    x = _x(spec)
    plan = repair_plan(a, x_example=x)
    b.load_state_dict(sd_b)
    goal = interpolated_goal(endpoint_stats(a, x, plan), endpoint_stats(b, x, plan), 0.5)
    state = interpolate_state(sd_a, sd_b, 0.5)
    found = {}
    folded = repair_state(copy.deepcopy(a), state, goal, x, plan, found=found)
    explicit = with_correction_layers(a, state, found)
    net = copy.deepcopy(a)
    net.load_state_dict(folded)
    x_test = _x(spec, 100, seed=9)
    ref = predict(explicit, x_test)
    assert (predict(net, x_test) - ref).abs().max() <= 1e-5 * max(1.0, float(ref.abs().max()))
    assert not torch.allclose(ref, predict(copy.deepcopy(a).eval().requires_grad_(False), x_test))


class _ResetAfter(torch.nn.Module):
    """The REPAIR paper's formulation: a conv followed by a BatchNorm whose affine is the goal (γ = goal σ,
    β = goal μ), run in train mode so that it normalises with the statistics of what reaches it."""

    def __init__(self, conv, goal_mean, goal_std):
        super().__init__()
        self.conv, self.bn = conv, torch.nn.BatchNorm2d(conv.out_channels, eps=1e-10)
        with torch.no_grad():
            self.bn.weight.copy_(goal_std)
            self.bn.bias.copy_(goal_mean)

    def forward(self, x):
        return self.bn(self.conv(x))


def test_vgg_repair_equals_batchnorm_reset_layers_after_every_conv():
    """The folded correction is the paper's: every conv of the merged VGG followed by a BatchNorm reset to the
    interpolated endpoint statistics (of B as aligned onto A), all resets in one train-mode pass over the
    calibration inputs, so each layer is reset after the layers before it. Endpoint statistics here come from
    the pre-activations directly, not from ``channel_stats``."""
    a, b = _pair(VGG)
    sd_a, sd_b = a.state_dict(), _aligned(a, b)
    b.load_state_dict(sd_b)
    x = _x(VGG)
    with torch.no_grad():
        za, zb = a.hidden_features(x, pre=True), b.hidden_features(x, pre=True)
    goal = [(0.5 * (p.mean((0, 2, 3)) + q.mean((0, 2, 3))),
             0.5 * (p.var((0, 2, 3), unbiased=False).sqrt() + q.var((0, 2, 3), unbiased=False).sqrt()))
            for p, q in zip(za, zb, strict=True)]
    state = interpolate_state(sd_a, sd_b, 0.5)
    paper = copy.deepcopy(a)
    paper.load_state_dict(state)
    for i, (mean, std) in enumerate(goal):
        paper.convs[i] = _ResetAfter(paper.convs[i], mean, std)
    with torch.no_grad():
        ref = paper.train()(x)  # one batch: each BatchNorm normalises with its input's exact statistics
    plan = repair_plan(a, x_example=x)
    assert [name for _, _, name in plan] == [f"convs.{i}" for i in range(len(goal))]
    net = copy.deepcopy(a)
    net.load_state_dict(repair_state(copy.deepcopy(a), state, interpolated_goal(
        endpoint_stats(a, x, plan), endpoint_stats(b, x, plan), 0.5), x, plan))
    assert (predict(net, x) - ref).abs().max() <= 1e-4 * max(1.0, float(ref.abs().max()))


@pytest.mark.parametrize("spec", [MLP, VGG], ids=["mlp", "vgg11"])
def test_repair_changes_nothing_at_the_endpoints(spec):
    a, b = _pair(spec)
    sd_a, sd_b = a.state_dict(), _aligned(a, b)
    x = _x(spec)
    plan = repair_plan(a, x_example=x)
    b.load_state_dict(sd_b)
    stats_a, stats_b = endpoint_stats(a, x, plan), endpoint_stats(b, x, plan)
    for lam, sd in ((0.0, sd_a), (1.0, sd_b)):
        goal = interpolated_goal(stats_a, stats_b, lam)
        out = repair_state(copy.deepcopy(a), interpolate_state(sd_a, sd_b, lam), goal, x, plan)
        for k, v in sd.items():
            assert torch.allclose(out[k], v, rtol=1e-6, atol=1e-7), f"λ={lam}: {k} changed"


@pytest.mark.parametrize("spec", [ModelSpec("mlp", (1, 8, 8), 5, width=0.1, depth=2, norm="batchnorm"),
                                  ModelSpec("vgg11", (1, 16, 16), 5, width=0.125, norm="batchnorm")],
                         ids=["mlp-bn", "vgg11-bn"])
def test_batchnorm_nets_repair_is_the_batchnorm_reset_and_meets_the_repair_goal(spec):
    a, b = _pair(spec, scale_gamma=True)
    # 2000 inputs: the reset pass normalises upstream layers with the batch's biased variance, eval mode with the
    # unbiased running one, which moves downstream statistics by O(1/n) of their spread
    x = _x(spec, 2000)
    for m in (a, b):
        reset_bn_stats(m, x, batch_size=len(x))
    sd_a, sd_b = a.state_dict(), _aligned(a, b)
    b.load_state_dict(sd_b)
    assert repair_plan(a, x_example=x) == []
    groups = permutation_spec(a).feature_index
    state = interpolate_state(sd_a, sd_b, 0.5)
    repaired = repair_state(copy.deepcopy(a), state, {}, x, [], batch_size=len(x))
    reset = copy.deepcopy(a)
    reset.load_state_dict(state)
    reset_bn_stats(reset, x, batch_size=len(x))
    for k, v in reset.state_dict().items():
        assert torch.equal(repaired[k], v), k
    # the reset meets REPAIR's goal: each post-norm pre-activation has the interpolated endpoint statistics
    for group, index in groups.items():
        sa, sb = channel_stats(a, index, x), channel_stats(b, index, x)
        goal = (torch.lerp(sa[0], sb[0], 0.5), torch.lerp(sa[1], sb[1], 0.5))
        _close(channel_stats(reset, index, x), *goal, group)


def test_a_residual_stream_without_batchnorm_is_refused():
    spec = ModelSpec("resnet20", (3, 8, 8), 5, width=0.25, norm="none")
    m = build_model(spec)
    with pytest.raises(RepairError, match="not the output of one layer"):
        repair_plan(m, x_example=_x(spec, 2))


def test_the_merge_job_writes_plain_and_repaired_curves_side_by_side(tmp_path, data_path):  # noqa: F811
    from lmcflow.tables import barrier_rows
    from tests.test_align_jobs import align_and_merge, make_point, planted_pair

    point = make_point(merge_extra={"repair": {"enabled": True, "examples": 300}})
    models, _ = planted_pair(tmp_path, data_path, point)
    _, interp, _ = align_and_merge(tmp_path, point, "weight_matching", models, data_path)
    assert sorted(set(interp["repair"])) == [False, True]
    plain, repaired = (interp[interp.repair == r].sort_values(["split", "lam"]) for r in (False, True))
    assert len(plain) == len(repaired)
    # B is A permuted: aligned, every θλ is A, and REPAIR (the identity there) leaves the curve as it is
    assert max(abs(plain["loss"].to_numpy() - repaired["loss"].to_numpy())) < 1e-4
    b = barrier_rows(interp)
    assert {r["repair"] for r in b} == {False, True}


def test_repair_methods_choose_which_paths_are_repaired(tmp_path, data_path):  # noqa: F811
    """merge.repair.methods: only the listed methods' paths get REPAIR'd rows; the others keep their plain ones."""
    from lmcflow.jobs.merge import run_merge_block
    from lmcflow.tables import read_table
    from tests.test_align_jobs import PAIRS, align_and_merge, make_point, planted_pair

    point = make_point(merge_extra={"repair": {"enabled": True, "examples": 300, "methods": ["identity"]}})
    models, _ = planted_pair(tmp_path, data_path, point)
    _, _, files = align_and_merge(tmp_path, point, "weight_matching", models, data_path)
    out = tmp_path / "both.parquet"
    run_merge_block(point, PAIRS, ["identity", "weight_matching"], models, {"weight_matching": files},
                    str(data_path), str(out), device="cpu")
    interp = read_table(out, "interpolation")
    repaired = interp.groupby("method")["repair"].agg(lambda r: sorted(set(r)))
    assert repaired.to_dict() == {"identity": [False, True], "weight_matching": [False]}
