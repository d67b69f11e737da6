import torch

from lmcflow.config import lambda_grid
from lmcflow.merging import evaluate_path, interpolate_state
from lmcflow.models import ModelSpec, build_model
from lmcflow.training import predict, reset_bn_stats


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
