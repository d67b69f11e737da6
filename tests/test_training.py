import logging
import math

import pytest
import torch
from torch import nn

from lmcflow.checkpoints import init_model
from lmcflow.evaluation import reset_bn_stats
from lmcflow.models import ModelSpec
from lmcflow.training import DivergenceError, late_loss_drop, lr_at, train

CFG = dict(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=1e-3, epochs=3, batch_size=64,
           schedule="cosine", warmup_epochs=0, augment="none", precision="fp32", checkpoint_every=1)
SPEC = ModelSpec("mlp", (20,), 4, width=0.1, depth=2)
CPU = torch.device("cpu")


def _weights(m):
    return {k: v.clone() for k, v in m.state_dict().items()}


def test_same_seed_gives_identical_weights(small_data):
    runs = []
    for _ in range(2):
        m = init_model(SPEC, seed=7)
        train(m, small_data, CFG, seed=7, device=CPU)
        runs.append(_weights(m))
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    other = init_model(SPEC, seed=8)
    train(other, small_data, CFG, seed=8, device=CPU)
    assert not torch.equal(runs[0]["layers.0.weight"], other.state_dict()["layers.0.weight"])


def test_zero_epochs_leave_the_seeded_init(small_data):
    m = init_model(SPEC, seed=4)
    before = _weights(m)
    info = train(m, small_data, {**CFG, "epochs": 0}, seed=4, device=CPU)
    assert info["history"] == [] and all(torch.equal(before[k], v) for k, v in m.state_dict().items())


def test_late_loss_drop_reads_the_last_fifth_of_training():
    hist = [{"train_loss": v} for v in (2.0, 1.0, 0.6, 0.5, 0.45, 0.42, 0.4, 0.39, 0.385, 0.38)]
    assert late_loss_drop(hist) == pytest.approx(0.39 - 0.38 + 0.385 - 0.385 + 0.0)  # L[8] − L[10]: ⌈10/5⌉ = 2
    assert late_loss_drop(hist[:5]) == pytest.approx(0.5 - 0.45)  # ⌈5/5⌉ = 1
    assert math.isnan(late_loss_drop(hist[:1])) and math.isnan(late_loss_drop([]))


def test_training_learns(small_data):
    m = init_model(SPEC, seed=0)
    info = train(m, small_data, dict(CFG, epochs=5), seed=0, device=CPU)
    assert info["history"][-1]["train_acc"] > 0.8 > info["history"][0]["train_acc"] - 0.5


def test_resume_after_interruption_is_bit_identical(small_data, tmp_path, caplog):
    ref = init_model(SPEC, seed=3)
    train(ref, small_data, CFG, seed=3, device=CPU)

    class Killed(Exception):
        pass

    state = tmp_path / "m.state.safetensors"
    m = init_model(SPEC, seed=3)

    class KillAfterTwoEpochs(logging.Handler):  # the training loop logs one line per epoch
        def emit(self, record):
            if record.getMessage().startswith("[train] epoch 2/3") and state.exists():
                raise Killed

    killer = KillAfterTwoEpochs()
    training_log = logging.getLogger("lmcflow.training")
    training_log.addHandler(killer)
    training_log.setLevel(logging.INFO)
    try:
        with pytest.raises(Killed):
            train(m, small_data, CFG, seed=3, device=CPU, state_path=state)
    finally:
        training_log.removeHandler(killer)
        training_log.setLevel(logging.NOTSET)
    assert state.exists()
    fresh = init_model(SPEC, seed=3)  # a new process would start from scratch weights
    with caplog.at_level(logging.INFO, logger="lmcflow.training"):
        train(fresh, small_data, CFG, seed=3, device=CPU, state_path=state)
    assert any("resumed" in r.getMessage() for r in caplog.records)
    assert not state.exists()
    assert all(torch.equal(v, fresh.state_dict()[k]) for k, v in ref.state_dict().items())


def test_divergence_stops_with_clear_error(small_data):
    m = init_model(SPEC, seed=0)
    with torch.no_grad():
        m.layers[0].weight[0, 0] = float("nan")
    with pytest.raises(DivergenceError, match=r"epoch 1/3, step 1/.*lr="):
        train(m, small_data, CFG, seed=0, device=CPU)


def test_lr_schedules():
    cfg = dict(lr=1.0, _steps_per_epoch=10, warmup_epochs=1, schedule="cosine")
    assert lr_at(0, 100, cfg) == pytest.approx(0.1)
    assert lr_at(9, 100, cfg) == pytest.approx(1.0)
    assert lr_at(10, 100, cfg) == pytest.approx(1.0)
    assert lr_at(99, 100, cfg) < 0.01
    assert lr_at(50, 100, dict(cfg, schedule="step", warmup_epochs=0)) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="train.schedule"):
        lr_at(50, 100, dict(cfg, schedule="bogus", warmup_epochs=0))
    # the identifiability authors' ResNet schedule: ×1.259 after each of the first 20 epochs, then constant
    geo = dict(lr=1e-4, _steps_per_epoch=10, warmup_epochs=20, lr_growth=1.259, schedule="geometric_warmup")
    assert lr_at(0, 1000, geo) == lr_at(9, 1000, geo) == pytest.approx(1e-4)
    assert lr_at(10, 1000, geo) == pytest.approx(1.259e-4)
    assert lr_at(200, 1000, geo) == lr_at(999, 1000, geo) == pytest.approx(1e-4 * 1.259 ** 20)
    assert 1e-4 * 1.259 ** 20 == pytest.approx(1e-2, rel=0.01)


def test_weight_decay_on_weights_only():
    from lmcflow.training import make_optimizer

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    opt = make_optimizer(model, {"optimizer": "adamw", "lr": 1e-2, "weight_decay": 0.5, "weight_decay_on": "weights"})
    decay = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    assert decay[id(model[0].weight)] == 0.5
    assert decay[id(model[0].bias)] == decay[id(model[1].weight)] == decay[id(model[1].bias)] == 0.0
    opt = make_optimizer(model, {"optimizer": "adamw", "lr": 1e-2, "weight_decay": 0.5})
    assert {g["weight_decay"] for g in opt.param_groups} == {0.5}


def test_crop_flip_augmentation_is_seeded_and_shape_preserving():
    from lmcflow.seeding import generator
    from lmcflow.training import augment_crop_flip

    x = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).reshape(2, 3, 8, 8) + 1
    a = augment_crop_flip(x, generator("aug", 0), pad=2)
    b = augment_crop_flip(x, generator("aug", 0), pad=2)
    assert a.shape == x.shape and torch.equal(a, b)
    # Every output is a (possibly flipped) 8x8 window of the zero-padded input.
    xp = torch.nn.functional.pad(x, (2, 2, 2, 2))
    for i in range(2):
        windows = [xp[i, :, dy:dy + 8, dx:dx + 8] for dy in range(5) for dx in range(5)]
        assert any(torch.equal(a[i], w) or torch.equal(a[i], w.flip(2)) for w in windows)


def test_default_config_trains_in_fp32_whatever_the_cpu(monkeypatch):
    """Verdicts must not depend on the machine: the CPU default pins fp32 even where bf16 would be fast."""
    from pathlib import Path

    import yaml

    from lmcflow import evaluation
    from lmcflow.config import expand_points

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/config.yaml").read_text())
    choices = {p.train.get("precision", "auto") for p in expand_points(cfg).values()}
    for fast_bf16 in (False, True):
        monkeypatch.setattr(evaluation, "cpu_has_fast_bf16", lambda fast=fast_bf16: fast)
        assert {evaluation.resolve_precision(c, CPU) for c in choices} == {"fp32"}
    assert evaluation.resolve_precision("auto", CPU) == "bf16"  # the last patch says "fast": auto would differ


def test_reset_bn_stats_is_the_exact_average_over_the_pass():
    """BatchNorm re-estimation (``torch.optim.swa_utils.update_bn``): the running statistics are the plain
    average of the batch statistics over one pass, whatever they held before; momentum is kept."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4, momentum=0.3))
    model[1].running_mean.fill_(5.0)  # stale statistics must not leak into the estimate
    x = torch.randn(300, 6) * 3 + 1
    reset_bn_stats(model, x, batch_size=100)
    with torch.no_grad():
        h = model[0](x).view(3, 100, 4)
    assert torch.allclose(model[1].running_mean, h.mean(1).mean(0), atol=1e-5)
    assert torch.allclose(model[1].running_var, h.var(1, unbiased=True).mean(0), atol=1e-4)
    assert model[1].num_batches_tracked.item() == 3 and model[1].momentum == 0.3 and not model.training
    # one batch of everything: the statistics of the whole set
    reset_bn_stats(model, x, batch_size=len(x))
    assert torch.allclose(model[1].running_mean, h.reshape(-1, 4).mean(0), atol=1e-5)


@pytest.mark.parametrize("mode", ["vendor_neutral", "native"])
def test_adamw_square_root_is_ieee_in_vendor_neutral_mode(monkeypatch, mode):
    """In vendor_neutral mode lmcflow's AdamW is the fused kernel, whose step takes the CPU's correctly rounded
    square root (the default AdamW's MKL vector square root rounds by CPU vendor): one step with β = 0 and no
    ε moves each weight by exactly -g / sqrt(fl(g²)), computed here in IEEE float32 by numpy."""
    import numpy as np

    from lmcflow import kernels
    from lmcflow.training import optimizer_for

    monkeypatch.setenv(kernels.MODE_VAR, mode)
    grad = torch.randn(1 << 14, generator=torch.Generator().manual_seed(1)) * 3
    p = torch.zeros_like(grad).requires_grad_()
    p.grad = grad.clone()
    opt = optimizer_for([p], {"optimizer": "adamw", "lr": 1.0, "betas": (0.0, 0.0), "weight_decay": 0.0})
    assert opt.defaults["fused"] is (True if mode == "vendor_neutral" else None)
    for group in opt.param_groups:
        group["eps"] = 0.0
    opt.step()
    g = grad.numpy()
    expected = -(g / np.sqrt((g * g).astype(np.float32)))
    if mode == "vendor_neutral":
        assert np.array_equal(p.detach().numpy(), expected)
