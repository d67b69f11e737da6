"""The GPU path: every job function on CUDA against the same job on the CPU.

Skipped where torch sees no CUDA device (CI has none); `benchmarks/gpu_checks.sh` runs this file
together with the GPU benchmarks on a machine that has one. Checkpoints are trained once on the CPU
and then merged, aligned and analysed on both devices, so differences come from the device alone:
fp32 on both (TF32 off, see `evaluation.use_strict_fp32_on_cuda`), so tables agree to fp32 rounding.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from lmcflow.alignment import load_permutation_sets, permutation_spec, weight_matching
from lmcflow.checkpoints import load_checkpoint
from lmcflow.config import Point
from lmcflow.evaluation import evaluate, predict, resolve_device
from lmcflow.io import load_tensors, save_tensors
from lmcflow.jobs.align import run_align_block
from lmcflow.jobs.identifiability import run_identifiability_block, run_swap_costs
from lmcflow.jobs.mechanism import run_mechanism_block
from lmcflow.jobs.merge import run_merge_block
from lmcflow.jobs.train import run_train
from lmcflow.models import ModelSpec, build_model
from lmcflow.symmetry import effective_state_dict
from lmcflow.tables import read_table

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
CUDA, CPU = "cuda", "cpu"
W_ASYM = {"kind": "w_asymmetric", "sigma_f": 1.0, "mask_seed": 3, "n_fixed": 0.25}


def make_point(arch="mlp", symmetry=None, precision="fp32", **model):
    model = {"arch": arch, "width": 1.0 if arch == "mlp" else 0.25, "depth": 2, "base_width": 32, "bias": True,
             "norm": "none" if arch == "mlp" else "batchnorm", "norm_groups": 1, "activation": "relu",
             "symmetry": symmetry or {"kind": "standard"}, **model}
    train = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": False, "weight_decay": 3e-3,
             "epochs": 2, "batch_size": 64, "schedule": "cosine", "warmup_epochs": 0,
             "augment": "none" if arch == "mlp" else "crop_flip", "precision": precision, "checkpoint_every": 0}
    merge = {"lambdas": 5, "methods": ["identity", "weight_matching", "activation_matching"],
             "train_eval_size": None, "bn_reset_size": None,
             "alignment": {"samples": 256, "max_iter": 50, "batch_size": 128}}
    analysis = {"mechanism": {"methods": ["identity"], "samples": 200},
                "identifiability": True, "n_random": 3, "n_samples": 200}
    return Point(study="t", point="p", dataset="syn", seeds=[0, 1], model=model, train=train, merge=merge,
                 analysis=analysis)


def _data_file(path, in_shape, n=(512, 128, 256), classes=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, *in_shape, generator=g)
    tensors = {}
    for split, m in zip(("train", "val", "test"), n):
        y = torch.randint(0, classes, (m,), generator=g)
        tensors[f"x_{split}"] = centers[y] + 0.8 * torch.randn(m, *in_shape, generator=g)
        tensors[f"y_{split}"] = y
    save_tensors(path, tensors, {"in_shape": list(in_shape), "num_classes": classes, "task": "classification"})
    return str(path)


@pytest.fixture(scope="module")
def vector_data(tmp_path_factory):
    return _data_file(tmp_path_factory.mktemp("vec") / "vec.safetensors", (20,))


@pytest.fixture(scope="module")
def image_data(tmp_path_factory):
    return _data_file(tmp_path_factory.mktemp("img") / "img.safetensors", (3, 16, 16), n=(384, 128, 128))


def _train_pair(point, data, tmp_path, device):
    ckpts = [str(tmp_path / f"{device}-seed-{s}.safetensors") for s in point.seeds]
    rows = [str(tmp_path / f"{device}-seed-{s}.parquet") for s in point.seeds]
    for s, c, r in zip(point.seeds, ckpts, rows):
        run_train(point, s, data, c, r, device=device)
    return ckpts, rows


def _numeric_close(a: pd.DataFrame, b: pd.DataFrame, rtol=1e-4, atol=1e-5, skip=()):
    """Tables of the same job on two devices: same rows and strings, numbers equal to fp32 rounding."""
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for col in a.columns:
        if col in skip:
            continue
        if pd.api.types.is_float_dtype(a[col]):
            np.testing.assert_allclose(a[col].to_numpy(float), b[col].to_numpy(float), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=col)
        else:
            assert a[col].tolist() == b[col].tolist(), col


def test_resolve_device_turns_tf32_off():
    torch.backends.cudnn.allow_tf32 = True
    assert resolve_device("auto").type == "cuda"
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32


@pytest.mark.parametrize("arch", ["vgg11", "resnet20"])
def test_conv_eval_in_fp32_matches_cpu(arch):
    """With TF32 (cuDNN's default) these logits differ from the CPU's by ~1e-3; in IEEE fp32 by ~1e-6."""
    dev = resolve_device(CUDA)
    torch.manual_seed(0)
    model = build_model(ModelSpec(arch=arch, in_shape=(3, 32, 32), num_classes=10, width=1.0, norm="batchnorm"))
    x = torch.randn(64, 3, 32, 32)
    cpu = predict(model, x)
    gpu = predict(model.to(dev), x.to(dev)).cpu()
    assert torch.allclose(cpu, gpu, rtol=1e-4, atol=1e-4), (cpu - gpu).abs().max()


@pytest.mark.parametrize("arch,precision", [("mlp", "fp32"), ("mlp", "auto"), ("resnet20", "auto"),
                                            ("vgg11", "fp32")])
def test_training_on_cuda_is_deterministic_and_portable(tmp_path, vector_data, image_data, arch, precision):
    point = make_point(arch, precision=precision)
    data = vector_data if arch == "mlp" else image_data
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    c1, r1 = _train_pair(point, data, tmp_path / "one", CUDA)
    _, r2 = _train_pair(point, data, tmp_path / "two", CUDA)
    rows1 = pd.concat([read_table(r, "runs") for r in r1])
    rows2 = pd.concat([read_table(r, "runs") for r in r2])
    # same config, same machine -> same bits, on the GPU too
    assert rows1.checkpoint_sha256.tolist() == rows2.checkpoint_sha256.tolist()
    assert rows1.checkpoint_sha256.nunique() == 2  # and the two seeds differ
    assert rows1.device.str.startswith("cuda:").all()
    assert (rows1.precision == ("bf16" if precision == "auto" and torch.cuda.is_bf16_supported() else "fp32")).all()
    # the checkpoint is plain fp32 and loads on a CPU-only machine with the same test metrics
    model, sd = load_checkpoint(c1[0], r1[0], CPU)
    history = load_tensors(c1[0])[1]["history"]
    assert history[-1]["train_loss"] < history[0]["train_loss"]  # it learned
    assert all(t.dtype in (torch.float32, torch.int64) for t in sd.values())
    tensors, meta = load_tensors(data)
    m = evaluate(model, tensors["x_test"], tensors["y_test"])
    assert abs(m["loss"] - rows1.test_loss.iloc[0]) < 1e-4 and abs(m["acc"] - rows1.test_acc.iloc[0]) < 1e-6


@pytest.mark.parametrize("arch,symmetry", [("mlp", None), ("mlp", W_ASYM), ("resnet20", None)])
def test_merge_align_mechanism_jobs_match_cpu(tmp_path, vector_data, image_data, arch, symmetry):
    point = make_point(arch, symmetry)
    data = vector_data if arch == "mlp" else image_data
    ckpts, rows = _train_pair(point, data, tmp_path, CPU)
    models, pairs = {s: [ckpts[s], rows[s]] for s in (0, 1)}, [(0, 1)]
    tables = {}
    for dev in (CPU, CUDA):
        out = {}
        run_merge_block(point, pairs, ["identity"], models, {}, data, str(tmp_path / f"{dev}-id.parquet"), device=dev)
        out["identity"] = read_table(tmp_path / f"{dev}-id.parquet", "interpolation")
        for method in ("weight_matching", "activation_matching"):
            perm, arow = str(tmp_path / f"{dev}-{method}.st"), str(tmp_path / f"{dev}-{method}.parquet")
            run_align_block(point, method, pairs, models, data, perm, arow, device=dev)
            out[f"{method}-perms"] = load_permutation_sets(perm)[0][(0, 1)]
            interp = str(tmp_path / f"{dev}-{method}-interp.parquet")
            run_merge_block(point, pairs, [method], models, {method: [perm, arow]}, data, interp, device=dev)
            out[method] = read_table(interp, "interpolation")
        mech = str(tmp_path / f"{dev}-mech.parquet")
        run_mechanism_block(point, "identity", pairs, models, None, data, mech, device=dev)
        out["mechanism"] = read_table(mech, "layer_metrics")
        tables[dev] = out
    cpu, gpu = tables[CPU], tables[CUDA]
    for method in ("weight_matching", "activation_matching"):
        p_cpu, p_gpu = cpu[f"{method}-perms"], gpu[f"{method}-perms"]
        assert p_cpu.keys() == p_gpu.keys() and all(torch.equal(p_cpu[g], p_gpu[g]) for g in p_cpu), method
    skip = ("wall_time_s", "seconds", "device")
    for name in ("identity", "weight_matching", "activation_matching", "mechanism"):
        _numeric_close(cpu[name], gpu[name], skip=skip, rtol=1e-3 if name == "mechanism" else 1e-4)


def test_identifiability_jobs_match_cpu(tmp_path, vector_data):
    point = make_point("mlp", {"kind": "w_asymmetric", "sigma_f": 1.0, "n_fixed": 0.25}, norm="layernorm")
    ckpts, rows = _train_pair(point, vector_data, tmp_path, CPU)
    models = {s: [c, r] for s, c, r in zip(point.seeds, ckpts, rows)}
    got = {}
    for dev in (CPU, CUDA):
        m, lmc = str(tmp_path / f"{dev}-m.parquet"), str(tmp_path / f"{dev}-l.parquet")
        s, t = str(tmp_path / f"{dev}-s.parquet"), str(tmp_path / f"{dev}-t.parquet")
        run_identifiability_block(point, point.pairs, models, vector_data, m, lmc, device=dev)
        run_swap_costs(point, models, vector_data, s, t, device=dev)
        got[dev] = [read_table(m, "identifiability"), read_table(lmc, "identifiability_lmc"),
                    read_table(s, "swap_costs"), read_table(t, "swap_matrix")]
    for a, b in zip(got[CPU], got[CUDA]):
        _numeric_close(a, b, rtol=1e-3, atol=1e-4, skip=("wall_time_s", "seconds", "device"))


def test_asymmetric_buffers_and_weight_matching_are_device_independent():
    spec = ModelSpec(arch="mlp", in_shape=(20,), num_classes=4, depth=2, base_width=64, symmetry=W_ASYM)
    torch.manual_seed(0)
    model = build_model(spec)
    dense_cpu = effective_state_dict(model)
    dense_gpu = effective_state_dict(model.to(resolve_device(CUDA)))
    assert all(torch.equal(dense_cpu[k], dense_gpu[k].cpu()) for k in dense_cpu)
    rspec = ModelSpec(arch="resnet20", in_shape=(3, 32, 32), num_classes=10, width=0.5, norm="batchnorm")
    torch.manual_seed(1)
    a, b = build_model(rspec), build_model(rspec)
    ps = permutation_spec(a)
    p_cpu, _ = weight_matching(ps, a.state_dict(), b.state_dict(), max_iter=20)
    p_gpu, _ = weight_matching(ps, a.cuda().state_dict(), b.cuda().state_dict(), max_iter=20)
    assert all(torch.equal(p_cpu[g], p_gpu[g].cpu()) for g in p_cpu)


# --------------------------------------------------------------------------- bundled training and batched λ paths
@pytest.mark.parametrize("arch,precision,compile_mode", [("mlp", "fp32", False), ("resnet20", "auto", False),
                                                         ("mlp", "auto", "default"),
                                                         ("mlp", "auto", "reduce-overhead")])
def test_bundle_on_cuda_is_deterministic_and_close_to_single_runs(tmp_path, vector_data, image_data, arch, precision,
                                                                  compile_mode):
    from lmcflow.jobs.train import run_train_bundle

    point = make_point(arch, precision=precision)
    point.seeds = [0, 1, 2]
    point.train["compile"] = compile_mode
    data = vector_data if arch == "mlp" else image_data
    runs = []
    for tag in ("a", "b"):
        members = [{"point": point, "seed": s, "ckpt": str(tmp_path / f"{tag}-{s}.safetensors"),
                    "row": str(tmp_path / f"{tag}-{s}.parquet")} for s in point.seeds]
        runs.append(pd.DataFrame(run_train_bundle(members, {"syn": data}, device=CUDA)))
    assert runs[0].checkpoint_sha256.tolist() == runs[1].checkpoint_sha256.tolist()  # same bits, twice
    single = str(tmp_path / "single-0.safetensors")
    run_train(point, 0, data, single, str(tmp_path / "single-0.parquet"), device=CUDA)
    a, b = load_tensors(single)[0], load_tensors(tmp_path / "a-0.safetensors")[0]
    dw = max((a[k].double() - b[k].double()).abs().max().item() for k in a)
    dloss = abs(read_table(tmp_path / "single-0.parquet", "runs").test_loss[0] - runs[0].test_loss[0])
    print(f"\n{arch} {precision} compile={compile_mode}: bundle member vs single run on CUDA: max |Δw| {dw:.2e}, "
          f"|Δ test loss| {dloss:.2e}")
    assert dloss < (1e-3 if precision == "fp32" else 5e-2)


@pytest.mark.parametrize("arch", ["mlp", "resnet20"])
def test_batched_lambda_path_on_cuda_equals_the_loop(arch):
    from lmcflow.config import lambda_grid
    from lmcflow.data import Dataset
    from lmcflow.merging import evaluate_path

    dev = resolve_device(CUDA)
    shape = (20,) if arch == "mlp" else (3, 16, 16)
    spec = ModelSpec(arch=arch, in_shape=shape, num_classes=4, width=1.0 if arch == "mlp" else 0.5, depth=2,
                     base_width=64, norm="none" if arch == "mlp" else "batchnorm")
    g = torch.Generator().manual_seed(0)
    data = Dataset({s: torch.randn(300, *shape, generator=g).to(dev) for s in ("train", "val", "test")},
                   {s: torch.randint(0, 4, (300,), generator=g).to(dev) for s in ("train", "val", "test")},
                   {"in_shape": list(shape), "num_classes": 4, "task": "classification"})
    torch.manual_seed(0)
    a, b = build_model(spec).to(dev), build_model(spec).to(dev)
    loop = evaluate_path(build_model(spec).to(dev), a.state_dict(), b.state_dict(), data, lambda_grid(5),
                         batched=False)
    stacked = evaluate_path(build_model(spec).to(dev), a.state_dict(), b.state_dict(), data, lambda_grid(5),
                            batched=True)
    for key, tol in (("loss", 1e-4), ("calibrated_loss", 1e-4), ("beta", 1e-3), ("acc", 0.01)):
        assert max(abs(r0[key] - r1[key]) for r0, r1 in zip(loop, stacked, strict=True)) <= tol, key
