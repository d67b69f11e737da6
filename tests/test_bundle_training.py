"""Bundled training (lmcflow.bundle_training, lmcflow.jobs.train.run_train_bundle) against single-model training.

Measured tolerances (CPU, fp32, tiny models of these tests; printed with ``pytest -s``): a member's
initial weights and batches (after augmentation) are bit-identical to its single run, one stacked
optimizer step is bit-identical to per-member steps, and what differs is the rounding of batched
matrix products: max |Δweight| ~1e-8 after 1 epoch, ~1e-7 after 10 epochs of the MLP (SGD), ~1e-6
for the BatchNorm ResNet; train losses agree to ~1e-8. The asserted bounds leave a factor of ~10-100.
On real data SGD can amplify these differences (benchmarks/bench_bundle.py reports them per run: after
one Fashion-MNIST epoch of the width-1/16 MLP four of five members were within ~1e-5 of their single runs,
one 2e-2 with test accuracy 0.08 points apart), as any change of summation order (threads, BLAS, GPU)
would. Parameters whose gradient is zero in exact arithmetic (a bias right before BatchNorm) are another
exception under AdamW, which scales their rounding noise up to steps of size lr.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch

from lmcflow.bundle_training import Member, Stack, check_bundle, train_bundle
from lmcflow.checkpoints import init_model, load_checkpoint
from lmcflow.config import Point
from lmcflow.data import Dataset
from lmcflow.io import load_tensors, save_tensors, sha256_file
from lmcflow.jobs.train import run_train, run_train_bundle
from lmcflow.models import ModelSpec
from lmcflow.random_ops import SeededRandomness, check_random_ops, step_key
from lmcflow.tables import read_table
from lmcflow.training import DivergenceError, optimizer_for, train

CPU = torch.device("cpu")
CFG = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": False, "weight_decay": 1e-3, "epochs": 3,
       "batch_size": 64, "schedule": "cosine", "warmup_epochs": 0, "augment": "none", "precision": "fp32",
       "checkpoint_every": 1}
MLP = ModelSpec("mlp", (20,), 4, width=0.1, depth=2)
W_ASYM = {"kind": "w_asymmetric", "n_fixed": 0.25, "mask_seed": 3}
WEIGHT_TOL = 1e-5  # measured ≤ 2e-7 (see module doc)
LOSS_TOL = 1e-6


def max_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    return max((sa[k].double() - sb[k].double()).abs().max().item() for k in sa)


def single_run(spec, data, cfg, seed, record: list | None = None):
    model = init_model(spec, seed)
    if record is not None:
        model.register_forward_pre_hook(lambda _m, args: record.append(args[0].clone()) if _m.training else None)
    info = train(model, data, cfg, seed, CPU)
    return model, info


def bundle_run(specs_seeds, data, cfg, record: list | None = None, **member):
    members = [Member(init_model(spec, seed), data, seed, cfg, name=f"{spec.width}/{seed}", **member)
               for spec, seed in specs_seeds]
    hook = (lambda _e, _s, _n, xb, _y: record.append(xb.clone())) if record is not None else None
    results = train_bundle(members, CPU, on_batch=hook)
    return [m.model for m in members], results


@pytest.fixture
def image_data():
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(3, 3, 8, 8, generator=g)

    def make(n):
        y = torch.randint(0, 3, (n,), generator=g)
        return centers[y] + 0.8 * torch.randn(n, 3, 8, 8, generator=g), y

    (xtr, ytr), (xva, yva), (xte, yte) = make(200), make(64), make(64)
    return Dataset({"train": xtr, "val": xva, "test": xte}, {"train": ytr, "val": yva, "test": yte},
                   {"in_shape": [3, 8, 8], "num_classes": 3, "task": "classification"})


# --------------------------------------------------------------------------- exactness of the parts
def test_bundle_of_one_is_single_model_training(small_data):
    ref, info = single_run(MLP, small_data, CFG, 5)
    (model,), (res,) = bundle_run([(MLP, 5)], small_data, CFG)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in ref.state_dict().items())
    assert res["history"] == info["history"]


def test_stack_holds_each_members_weights_bit_for_bit(image_data):
    for spec in (ModelSpec("mlp", (20,), 4, width=0.1, depth=2, norm="layernorm", symmetry=W_ASYM),
                 ModelSpec("resnet20", (3, 8, 8), 3, width=0.25, norm="batchnorm")):
        models = [init_model(spec, s) for s in (0, 1, 2)]
        stack = Stack(models)
        assert len(stack) == 3
        for k, m in enumerate(models):
            state = stack.member_state(k)
            assert state.keys() == m.state_dict().keys()
            assert all(torch.equal(v, state[n]) for n, v in m.state_dict().items())
        for n, p in m.named_parameters():  # the layout functional_call sees
            assert torch.equal(stack._from_layout(n, stack.params[n])[2], p)


def test_stacked_optimizer_step_equals_per_member_steps():
    """SGD (momentum, Nesterov, weight decay) and AdamW are elementwise: one optimizer over stacked
    parameters gives every member exactly its own update, bit for bit."""
    torch.manual_seed(0)
    shapes = [(37, 19), (19,), (5, 3, 3, 3)]
    sgd = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 3e-3}
    adamw = {"optimizer": "adamw", "lr": 1e-3, "weight_decay": 0.03}
    for cfg in ({**sgd, "nesterov": True}, {**sgd, "nesterov": False}, adamw,
                {**sgd, "nesterov": False, "weight_decay_on": "weights"}, {**adamw, "weight_decay_on": "weights"}):
        own = [[torch.randn(*s, requires_grad=True) for s in shapes] for _ in range(3)]
        stacked = [torch.stack([p[i].detach() for p in own]).requires_grad_() for i in range(len(shapes))]
        opts, opt = [optimizer_for(p, cfg) for p in own], optimizer_for(stacked, cfg, stacked=True)
        decayed = [[p.shape for p in g["params"]] for g in opt.param_groups if g["weight_decay"] > 0]
        assert decayed == ([[(3, 37, 19), (3, 5, 3, 3, 3)]] if cfg.get("weight_decay_on") == "weights"
                           else [[(3, 37, 19), (3, 19), (3, 5, 3, 3, 3)]]), cfg
        for _ in range(4):
            grads = [[torch.randn(*s) for s in shapes] for _ in own]
            for params, g, o in zip(own, grads, opts, strict=True):
                for p, gi in zip(params, g, strict=True):
                    p.grad = gi.clone()
                o.step()
            for i, p in enumerate(stacked):
                p.grad = torch.stack([g[i] for g in grads])
            opt.step()
        assert all(torch.equal(stacked[i][k], own[k][i]) for k in range(3) for i in range(len(shapes))), cfg


# --------------------------------------------------------------------------- members against their single runs
def test_members_see_their_single_run_batches_and_stay_close(small_data):
    seeds = (0, 1, 2)
    drift = {}
    for epochs in (1, 10):
        cfg = dict(CFG, epochs=epochs)
        rec_b: list = []
        models, results = bundle_run([(MLP, s) for s in seeds], small_data, cfg, record=rec_b)
        for k, s in enumerate(seeds):
            rec_s: list = []
            ref, info = single_run(MLP, small_data, cfg, s, record=rec_s)
            assert len(rec_s) == len(rec_b)
            assert all(torch.equal(xb[k], xs) for xb, xs in zip(rec_b, rec_s, strict=True)), "batch order differs"
            drift[(epochs, s)] = max_diff(ref, models[k])
            for h_b, h_s in zip(results[k]["history"], info["history"], strict=True):
                assert abs(h_b["train_loss"] - h_s["train_loss"]) < LOSS_TOL and h_b["lr"] == h_s["lr"]
    print(f"\nMLP bundle of 3 vs single runs, max |Δweight|: after 1 epoch "
          f"{max(v for (e, _), v in drift.items() if e == 1):.2e}, after 10 epochs "
          f"{max(v for (e, _), v in drift.items() if e == 10):.2e}")
    assert max(drift.values()) < WEIGHT_TOL


def test_bf16_autocast_bundle(small_data):
    """bf16 autocast under vmap; bf16 rounding makes members drift more (measured 2e-3 after 3 epochs)."""
    cfg = dict(CFG, precision="bf16")
    models, results = bundle_run([(MLP, 0), (MLP, 1)], small_data, cfg)
    for k, m in enumerate(models):
        ref, info = single_run(MLP, small_data, cfg, k)
        assert results[k]["precision"] == info["precision"] == "bf16"
        assert max_diff(ref, m) < 2e-2
        assert abs(results[k]["history"][-1]["train_loss"] - info["history"][-1]["train_loss"]) < 1e-3


def test_batchnorm_conv_bundle_with_augmentation(image_data):
    if os.environ.get("MKL_CBWR") != "COMPATIBLE":
        # MKL picks its GEMM blocking by matrix shape on some CPUs (seen on an AVX-512 Xeon, in native and in
        # portable mode): a bundle's grouped convolutions then round otherwise than a single model's and SGD
        # grows the difference past these bounds. The bundling itself (data order, augmentation, per-member
        # running statistics) is checked with MKL's shape-independent GEMM, which must be set before it loads.
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                              f"{__file__}::test_batchnorm_conv_bundle_with_augmentation"],
                             env={**os.environ, "MKL_CBWR": "COMPATIBLE"}, capture_output=True, text=True,
                             timeout=600)
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
        return
    spec = ModelSpec("resnet20", (3, 8, 8), 3, width=0.25, norm="batchnorm")
    cfg = dict(CFG, epochs=2, augment="crop_flip", batch_size=50)
    rec_b: list = []
    models, _ = bundle_run([(spec, 0), (spec, 1)], image_data, cfg, record=rec_b)
    worst = 0.0
    for k, s in enumerate((0, 1)):
        rec_s: list = []
        ref, _ = single_run(spec, image_data, cfg, s, record=rec_s)
        assert all(torch.equal(xb[k], xs) for xb, xs in zip(rec_b, rec_s, strict=True)), "augmented batches differ"
        worst = max(worst, max_diff(ref, models[k]))
        # running statistics were updated per member, not shared
        assert torch.equal(ref.stem_norm.num_batches_tracked, models[k].stem_norm.num_batches_tracked)
        assert torch.allclose(ref.stem_norm.running_var, models[k].stem_norm.running_var, atol=1e-5)
    assert not torch.allclose(models[0].stem_norm.running_mean, models[1].stem_norm.running_mean)
    print(f"\nResNet-20 (BatchNorm, crop+flip) bundle of 2, max |Δ| of weights and running stats: {worst:.2e}")
    assert worst < 1e-4


def test_members_from_different_sigma_f_points(small_data):
    low = ModelSpec("mlp", (20,), 4, width=0.1, depth=2, symmetry={**W_ASYM, "sigma_f": 0.3})
    high = ModelSpec("mlp", (20,), 4, width=0.1, depth=2, symmetry={**W_ASYM, "sigma_f": 3.0})
    cfg = dict(CFG, optimizer="adamw", lr=3e-3)
    pairs = [(low, 0), (high, 0), (low, 1), (high, 1)]
    models, _ = bundle_run(pairs, small_data, cfg)
    for (spec, seed), m in zip(pairs, models, strict=True):
        ref, _ = single_run(spec, small_data, cfg, seed)
        for name, buf in ref.named_buffers():  # masks and offsets are the member's own, untouched
            assert torch.equal(buf, m.get_buffer(name))
        assert max_diff(ref, m) < WEIGHT_TOL
        layer = m.layers[0]
        assert torch.all(layer.weight[layer.mask == 0] == 0)
    assert not torch.equal(models[0].layers[0].offset, models[1].layers[0].offset)


def test_members_with_their_own_datasets_and_a_regression_task(small_data):
    """Datasets of equal shape (the intrinsic-dimension and coherence sweeps) are gathered per member."""
    shifted = Dataset({k: v + 1.5 for k, v in small_data.x.items()}, {k: v.flip(0) for k, v in small_data.y.items()},
                      small_data.meta)
    cfg = dict(CFG, epochs=2)
    datasets = [small_data, shifted, small_data]
    members = [Member(init_model(MLP, s), d, s, cfg, name=str(s)) for s, d in enumerate(datasets)]
    rec_b: list = []
    train_bundle(members, CPU, on_batch=lambda _e, _s, _n, xb, _y: rec_b.append(xb.clone()))
    for k, (m, d) in enumerate(zip(members, datasets, strict=True)):
        rec_s: list = []
        ref, _ = single_run(MLP, d, cfg, k, record=rec_s)
        assert all(torch.equal(xb[k], xs) for xb, xs in zip(rec_b, rec_s, strict=True))
        assert max_diff(ref, m.model) < WEIGHT_TOL
    # a scalar-output regression model (the coherence study's sum of ReLUs)
    reg = Dataset(small_data.x, {k: v[:, 0].sin() for k, v in small_data.x.items()},
                  {"in_shape": [20], "num_classes": 1, "task": "regression"})
    spec = ModelSpec("sum_relu", (20,), 1, width=0.1, symmetry={"kind": "w_asymmetric", "sigma_f": 0.0,
                                                               "mask_type": "bernoulli", "mask_density": 0.5})
    rcfg = dict(cfg, optimizer="adamw", lr=3e-3, weight_decay=0.0)
    models, results = bundle_run([(spec, 0), (spec, 1)], reg, rcfg)
    for k, m in enumerate(models):
        ref, info = single_run(spec, reg, rcfg, k)
        assert max_diff(ref, m) < WEIGHT_TOL
        assert abs(results[k]["history"][-1]["train_loss"] - info["history"][-1]["train_loss"]) < LOSS_TOL


def test_bundle_refuses_members_that_cannot_share_it(small_data):
    a = Member(init_model(MLP, 0), small_data, 0, CFG, name="t/a seed=0")
    with pytest.raises(ValueError, match=r"t/a seed=0.*t/b seed=1.*train\.lr"):
        check_bundle([a, Member(init_model(MLP, 1), small_data, 1, dict(CFG, lr=0.1), name="t/b seed=1")])
    wide = ModelSpec("mlp", (20,), 4, width=0.2, depth=2)
    with pytest.raises(ValueError, match=r"t/c seed=1.*different structure"):
        check_bundle([a, Member(init_model(wide, 1), small_data, 1, CFG, name="t/c seed=1")])
    asym = ModelSpec("mlp", (20,), 4, width=0.1, depth=2, symmetry=W_ASYM)
    with pytest.raises(ValueError, match="different structure"):
        check_bundle([a, Member(init_model(asym, 1), small_data, 1, CFG, name="t/d seed=1")])
    # execution-only keys may differ
    check_bundle([a, Member(init_model(MLP, 1), small_data, 1, dict(CFG, checkpoint_every=0, bundle=4), name="e")])


def dropout_mlp(num_classes: int, in_shape: tuple, hidden: int = 32) -> torch.nn.Module:
    """A user's MLP with active dropout (``model.factory: tests.test_bundle_training:dropout_mlp``)."""
    nn = torch.nn
    return nn.Sequential(nn.Linear(in_shape[0], hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, num_classes))


DROPOUT_MLP = ModelSpec("factory", (20,), 4, factory="tests.test_bundle_training:dropout_mlp")


def test_dropout_trains_in_a_bundle_with_each_models_own_stream(small_data):
    """A member's dropout masks come from its own seed: in a bundle of 3 each model equals, bit for bit, its run
    in a stacked bundle of its own (the promise of docs/usage.md, "Bundles": CPU, one thread, MLP), and its
    unstacked single run within the bundles' rounding drift (same masks; dropout itself moves the weights far
    more than that). The masks differ between seeds and keep 1 - p of the units."""
    seeds = (0, 1, 2)
    cfg = dict(CFG, epochs=2)
    torch.set_num_threads(1)
    models, _ = bundle_run([(DROPOUT_MLP, s) for s in seeds], small_data, cfg)
    for k, s in enumerate(seeds):
        alone = Member(init_model(DROPOUT_MLP, s), small_data, s, cfg)
        train_bundle([alone], CPU, stack_alone=True)
        assert all(torch.equal(v, models[k].state_dict()[n]) for n, v in alone.model.state_dict().items()), s
        solo, _ = single_run(DROPOUT_MLP, small_data, cfg, s)
        assert max_diff(solo, models[k]) < WEIGHT_TOL, s
        undropped = Member(init_model(DROPOUT_MLP, s), small_data, s, cfg)
        for m in undropped.model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.0
        train_bundle([undropped], CPU, stack_alone=True)
        assert max_diff(undropped.model, models[k]) > 100 * WEIGHT_TOL, s  # the masks were applied
    masks = [SeededRandomness().at(torch.tensor(step_key(s, 7)))._keep((64, 32), CPU, 0.1) for s in seeds]
    assert all(not torch.equal(masks[i], masks[j]) for i in range(3) for j in range(i))
    assert all(abs(m.float().mean().item() - 0.9) < 0.02 for m in masks)


def test_random_ops_lmcflow_cannot_seed_are_refused_before_training(small_data):
    model = torch.nn.Sequential(torch.nn.Linear(20, 8), torch.nn.RReLU(), torch.nn.Linear(8, 4))
    with pytest.raises(ValueError, match="rrelu"):
        train(model, small_data, CFG, 0, CPU, name="rrelu net")
    assert check_random_ops(init_model(DROPOUT_MLP, 0), (20,)) and not check_random_ops(init_model(MLP, 0), (20,))


# --------------------------------------------------------------------------- resumption
class Killed(Exception):
    pass


def _kill_after(epoch_line: str, states: list):
    class Handler(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith(epoch_line) and all(p.exists() for p in states):
                raise Killed

    return Handler()


def _interrupted_bundle(data, cfg, seeds, states, digest):
    killer = _kill_after("[bundle] epoch 2/3", states)
    logger = logging.getLogger("lmcflow.bundle_training")
    logger.addHandler(killer)
    logger.setLevel(logging.INFO)
    try:
        with pytest.raises(Killed):
            bundle_run_with_states(data, cfg, seeds, states, digest)
    finally:
        logger.removeHandler(killer)
        logger.setLevel(logging.NOTSET)
    assert all(p.exists() for p in states)


def bundle_run_with_states(data, cfg, seeds, states, digest):
    members = [Member(init_model(MLP, s), data, s, cfg, name=f"seed={s}", state_path=p, digest=digest)
               for s, p in zip(seeds, states, strict=True)]
    train_bundle(members, CPU)
    return [m.model for m in members]


ADAMW_DECAY_ON_WEIGHTS = dict(CFG, optimizer="adamw", lr=3e-3, weight_decay=0.1, weight_decay_on="weights")


@pytest.mark.parametrize("cfg", [CFG, ADAMW_DECAY_ON_WEIGHTS], ids=["sgd", "adamw-decay-on-weights"])
def test_resume_after_interruption_is_bit_identical(small_data, tmp_path, caplog, cfg):
    """Also with two parameter groups (no decay on biases), whose optimizer order differs from the
    parameters' order: the stacked optimizer state is saved and restored by parameter name."""
    seeds = (0, 1)
    states = [tmp_path / f"seed-{s}.state.safetensors" for s in seeds]
    reference = bundle_run_with_states(small_data, cfg, seeds, [tmp_path / "ref0", tmp_path / "ref1"], "cfg")
    _interrupted_bundle(small_data, cfg, seeds, states, "cfg")
    with caplog.at_level(logging.INFO, logger="lmcflow"):
        resumed = bundle_run_with_states(small_data, cfg, seeds, states, "cfg")
    assert sum("resumed from" in r.getMessage() for r in caplog.records) == 2
    assert not any(p.exists() for p in states)
    for ref, m in zip(reference, resumed, strict=True):
        assert all(torch.equal(v, m.state_dict()[k]) for k, v in ref.state_dict().items())


def test_resume_with_members_at_different_epochs_is_bit_identical(small_data, tmp_path, caplog):
    """A kill between two members' state writes leaves one member an epoch ahead: the members then train as
    separate stacked groups and still end bit-identical to the uninterrupted bundle."""
    seeds = (0, 1)
    states = [tmp_path / f"seed-{s}.state.safetensors" for s in seeds]
    reference = bundle_run_with_states(small_data, CFG, seeds, [tmp_path / "ref0", tmp_path / "ref1"], "cfg")
    _interrupted_bundle(small_data, CFG, seeds, states, "cfg")
    states[1].unlink()  # member 1 lost its state: it restarts from its initialisation
    with caplog.at_level(logging.INFO, logger="lmcflow"):
        resumed = bundle_run_with_states(small_data, CFG, seeds, states, "cfg")
    assert sum("resumed from" in r.getMessage() for r in caplog.records) == 1
    for ref, m in zip(reference, resumed, strict=True):
        assert all(torch.equal(v, m.state_dict()[k]) for k, v in ref.state_dict().items())


def test_state_of_another_config_is_discarded(small_data, tmp_path, caplog):
    seeds = (0, 1)
    states = [tmp_path / f"seed-{s}.state.safetensors" for s in seeds]
    _interrupted_bundle(small_data, CFG, seeds, states, "digest-of-lr-0.05")
    changed = dict(CFG, lr=0.02)
    fresh = bundle_run_with_states(small_data, changed, seeds, [tmp_path / "a", tmp_path / "b"], "digest-of-lr-0.02")
    with caplog.at_level(logging.INFO, logger="lmcflow"):
        rerun = bundle_run_with_states(small_data, changed, seeds, states, "digest-of-lr-0.02")
    assert sum("state of another configuration" in r.getMessage() for r in caplog.records) == 2
    assert not any("resumed from" in r.getMessage() for r in caplog.records)
    for ref, m in zip(fresh, rerun, strict=True):
        assert all(torch.equal(v, m.state_dict()[k]) for k, v in ref.state_dict().items())
    # single-model training checks the digest the same way
    state = tmp_path / "single.state.safetensors"
    save_tensors(state, {"x": torch.zeros(1)}, {"epoch": 1, "digest": "other"})
    model = init_model(MLP, 0)
    train(model, small_data, changed, 0, CPU, state_path=state, state_digest="digest-of-lr-0.02")
    assert not state.exists()
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in single_run(MLP, small_data, changed, 0)[0]
               .state_dict().items())


# --------------------------------------------------------------------------- the job function
def _data_file(path):
    g = torch.Generator().manual_seed(0)
    centers = torch.randn(4, 20, generator=g) * 2
    tensors = {}
    for split, n in (("train", 256), ("val", 64), ("test", 128)):
        y = torch.randint(0, 4, (n,), generator=g)
        tensors[f"x_{split}"], tensors[f"y_{split}"] = centers[y] + torch.randn(n, 20, generator=g), y
    save_tensors(path, tensors, {"in_shape": [20], "num_classes": 4, "task": "classification"})
    return str(path)


def make_point(pid="p", symmetry=None, **train_over):
    model = {"arch": "mlp", "width": 0.1, "depth": 2, "base_width": 512, "bias": True, "norm": "none",
             "norm_groups": 1, "activation": "relu", "symmetry": symmetry or {"kind": "standard"}}
    return Point(study="t", point=pid, dataset="syn", seeds=[0, 1, 2], model=model,
                 train={**CFG, "epochs": 2, **train_over}, merge={"lambdas": 3})


def _member(tmp, point, seed, tag=""):
    return {"point": point, "seed": seed, "ckpt": str(tmp / f"{tag}{point.point}-{seed}.safetensors"),
            "row": str(tmp / f"{tag}{point.point}-{seed}.parquet")}


def test_run_train_bundle_writes_what_run_train_writes(tmp_path):
    data = _data_file(tmp_path / "syn.safetensors")
    point = make_point()
    run_train(point, 0, data, str(tmp_path / "single.safetensors"), str(tmp_path / "single.parquet"), "cpu")
    (row1,) = run_train_bundle([_member(tmp_path, point, 0, "one-")], {"syn": data}, "cpu")
    assert sha256_file(tmp_path / "single.safetensors") == row1["checkpoint_sha256"]  # same bytes, metadata too
    assert row1["bundle_id"] == read_table(tmp_path / "single.parquet", "runs").bundle_id[0] == "t/p/seed-0"
    members = [_member(tmp_path, point, s, "three-") for s in (0, 1, 2)]
    rows = run_train_bundle(members, {"syn": data}, "cpu")
    _, meta_single = load_tensors(tmp_path / "single.safetensors")
    for m, row in zip(members, rows, strict=True):
        table = read_table(m["row"], "runs")
        assert len(table) == 1 and table.bundle_id[0] == "t/p/seeds-0+1+2" and table.seed[0] == m["seed"]
        load_checkpoint(m["ckpt"], m["row"], "cpu")  # hash-verified
        _, meta = load_tensors(m["ckpt"])
        assert meta.keys() == meta_single.keys() and meta["seed"] == m["seed"]
        assert row["checkpoint_sha256"] == sha256_file(m["ckpt"])
    single, _ = load_checkpoint(str(tmp_path / "single.safetensors"), str(tmp_path / "single.parquet"), "cpu")
    member, _ = load_checkpoint(members[0]["ckpt"], members[0]["row"], "cpu")
    assert max_diff(single, member) < WEIGHT_TOL
    assert not list(tmp_path.glob("*.state.safetensors"))


def test_divergence_names_the_member_and_keeps_the_healthy_ones(tmp_path, caplog):
    data = _data_file(tmp_path / "syn.safetensors")
    ok = make_point("ok", symmetry={**W_ASYM, "sigma_f": 1.0})
    bad = make_point("bad", symmetry={**W_ASYM, "sigma_f": 1e30})  # fixed offsets overflow fp32
    members = [_member(tmp_path, ok, 0), _member(tmp_path, bad, 0), _member(tmp_path, ok, 1)]
    with pytest.raises(DivergenceError, match=r"1 of 3 bundle members: t/bad seed=0: loss=\S+ at epoch 1/2, "
                                              r"step 1/4 \(global step 0\), lr=0\.05") as err:
        run_train_bundle(members, {"syn": data}, "cpu")
    assert [d["seed"] for d in err.value.diverged] == [0]
    healthy = [members[0], members[2]]
    first = {m["ckpt"]: read_table(m["row"], "runs").checkpoint_sha256[0] for m in healthy}
    states = [tmp_path / f"ok-{s}.state.safetensors" for s in (0, 1)]
    assert all(p.exists() for p in states) and not (tmp_path / "bad-0.safetensors").exists()
    for m in healthy:  # as Snakemake does with a failed job's outputs
        for key in ("ckpt", "row"):
            (tmp_path / m[key]).unlink()
    fixed = make_point("bad", symmetry={**W_ASYM, "sigma_f": 1.0})
    members[1] = _member(tmp_path, fixed, 0)
    with caplog.at_level(logging.INFO, logger="lmcflow"):
        rows = run_train_bundle(members, {"syn": data}, "cpu")
    assert sum("resumed from" in r.getMessage() and "after epoch 2" in r.getMessage() for r in caplog.records) == 2
    for m in healthy:
        assert read_table(m["row"], "runs").checkpoint_sha256[0] == first[m["ckpt"]]
    assert len(rows) == 3 and (tmp_path / "bad-0.safetensors").exists()
    assert not any(p.exists() for p in states)


def test_bundle_key_at_dag_construction():
    """Torch-free: which points may share a bundle, decided from the config alone."""
    from lmcflow.config import ConfigError, bundle_key, check_bundle_points

    data_cfg = {"synthetic": {"k2": {"generator": "gaussian_subspace", "d": 128, "k": 2, "n_train": 5000},
                              "k8": {"generator": "gaussian_subspace", "d": 128, "k": 8, "n_train": 5000},
                              "small": {"generator": "gaussian_subspace", "d": 128, "k": 8, "n_train": 1000}}}
    sym = {**W_ASYM, "sigma_f": 1.0}
    a = make_point("a", symmetry=sym)
    assert bundle_key(a) == bundle_key(make_point("b", symmetry={**sym, "sigma_f": 3.0, "mask_seed": 7}))
    assert bundle_key(a) == bundle_key(make_point("c", symmetry={**sym, "kind": "syre"}))  # same layers
    assert bundle_key(a) == bundle_key(make_point("d", symmetry=sym, checkpoint_every=0, bundle=8))
    assert bundle_key(a) != bundle_key(make_point("e"))  # standard layers: no masks
    assert bundle_key(a) != bundle_key(make_point("f", symmetry=sym, lr=0.1))
    k2, k8, small = (Point(**{**make_point("g").__dict__, "dataset": name}) for name in ("k2", "k8", "small"))
    assert bundle_key(k2, data_cfg) == bundle_key(k8, data_cfg) != bundle_key(small, data_cfg)
    check_bundle_points([k2, k8], data_cfg)
    with pytest.raises(ConfigError, match=r"t/g and t/g cannot train in one bundle: they differ in data"):
        check_bundle_points([k2, small], data_cfg)
    wide = make_point("w")
    wide.model["width"] = 0.2
    with pytest.raises(ConfigError, match=r"t/a and t/w .* differ in layers, model\.width"):
        check_bundle_points([a, wide])


def test_grid_groups_unite_points_of_one_shape_and_stack_what_stacks():
    """Torch-free: a study's points share jobs where model shape, seeds and bundle agree; inside a group, the
    points whose models stack (bundle_key) form one bundle each."""
    from lmcflow.grouping import grid_groups, stacks

    data_cfg = {"synthetic": {name: {"generator": "gaussian_subspace", "d": 128, "k": k, "n_train": 5000}
                              for name, k in (("k2", 2), ("k8", 8))}}

    def pt(dataset, sigma_f, epochs, width=0.1, **train_over):
        p = make_point(f"dataset-{dataset}__sigma_f-{sigma_f}__epochs-{epochs}__width-{width}",
                       symmetry={**W_ASYM, "sigma_f": sigma_f}, epochs=epochs, **train_over)
        p.model["width"] = width
        p.dataset = dataset
        p.swept = {"dataset": dataset, "model.symmetry.sigma_f": sigma_f, "train.epochs": epochs,
                   "model.width": width}
        return p

    grid = [pt(d, s, e) for d in ("k2", "k8") for s in (0.0, 1.0) for e in (0, 10)]
    # one group over k, σ_F and epochs, labelled by the sweep value its points share; two bundles (epochs differ)
    assert grid_groups(grid) == {"grid__width-0.1": grid}
    assert stacks(grid, data_cfg) == [[p for p in grid if p.train["epochs"] == e] for e in (0, 10)]
    # other layers (standard: no masks) or learning settings: another bundle of the same group
    plain = make_point("plain", epochs=10)
    plain.model["width"], plain.dataset = 0.1, "k2"
    assert stacks([*grid, plain], data_cfg)[-1] == [plain]
    # another width: another group; a point that shares its shape with no other is alone, under its point id
    wide = pt("k2", 1.0, 10, width=0.2)
    assert grid_groups([*grid, wide])[wide.point] == [wide]
    # train.bundle_grid: 1 keeps a point apart; differing seeds or bundle sizes never share a group
    alone = pt("k8", 3.0, 10, bundle_grid=1)
    assert grid_groups([*grid, alone])[alone.point] == [alone]
    other_seeds = pt("k8", 3.0, 10)
    other_seeds.seeds = [0, 1]
    assert grid_groups([*grid, other_seeds])[other_seeds.point] == [other_seeds]
    other_bundle = pt("k8", 3.0, 10, bundle=2)
    assert grid_groups([*grid, other_bundle])[other_bundle.point] == [other_bundle]
    # train.bundle: 1 means one model per job; train.bundle_grid caps the points per group (study order)
    assert all(len(g) == 1 for g in grid_groups([pt(d, 1.0, 10, bundle=1) for d in ("k2", "k8")]).values())
    capped = [pt(d, s, 10, bundle_grid=3) for d in ("k2", "k8") for s in (0.0, 1.0)]
    assert [len(g) for g in grid_groups(capped).values()] == [3, 1]
    # two groups sharing the same sweep values are numbered, never merged or overwritten
    a, b = pt("k2", 0.0, 10), pt("k8", 1.0, 10)
    c, d = pt("k2", 1.0, 10), pt("k8", 0.0, 10)
    c.seeds = d.seeds = [0, 1]
    a.swept.pop("model.width"), b.swept.pop("model.width")
    c.swept.pop("model.width"), d.swept.pop("model.width")
    assert grid_groups([a, b, c, d]) == {"grid__epochs-10": [a, b], "grid__epochs-10-2": [c, d]}
