"""Identifiability jobs without Snakemake: per-point analyses on tiny trained models and the
training-subset datasets (the claims: tests/test_claims_identifiability.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lmcflow.config import Point
from lmcflow.data import load_dataset, prepare_dataset, subset_indices
from lmcflow.figures import identifiability as ident_figures
from lmcflow.figures import swap_costs as swap_figures
from lmcflow.figures.common import plt
from lmcflow.io import save_tensors
from lmcflow.jobs import figures as figure_jobs
from lmcflow.jobs import identifiability as ident_jobs
from lmcflow.jobs.figures import run_identifiability_figures, run_swap_cost_figures
from lmcflow.jobs.identifiability import run_coherence_table, run_identifiability_block, run_swap_costs
from lmcflow.jobs.merge import run_merge_block
from lmcflow.jobs.train import run_train
from lmcflow.tables import IDENT_POINT_COLUMNS, TABLES, concat_tables, read_table, write_table

TRAIN = {"optimizer": "adamw", "lr": 3e-3, "weight_decay": 0.0, "epochs": 2, "batch_size": 64,
         "schedule": "cosine", "warmup_epochs": 0, "precision": "fp32", "checkpoint_every": 0}
MERGE = {"lambdas": 3, "methods": ["identity"], "train_eval_size": None, "bn_reset_size": None}


def _point(study, model, analysis, dataset="d", seeds=(0, 1)):
    return Point(study=study, point="p", dataset=dataset, seeds=list(seeds), model=model, train=dict(TRAIN),
                 merge=dict(MERGE), analysis=analysis)


def _train_all(point, data_path, tmp_path):
    """{seed: [checkpoint, run row]} of the point's models, trained."""
    models = {}
    for s in point.seeds:
        models[s] = [str(tmp_path / f"m{s}.safetensors"), str(tmp_path / f"m{s}.parquet")]
        run_train(point, s, str(data_path), *models[s], device="cpu")
    return models


@pytest.fixture(scope="module")
def gs_data(tmp_path_factory):
    path = tmp_path_factory.mktemp("gs") / "gs.safetensors"
    prepare_dataset("gs", {"val_size": 0, "split_seed": 0, "synthetic": {"gs": {
        "generator": "gaussian_subspace", "classes": 4, "d": 12, "k": 3, "n_train": 300, "n_val": 100,
        "n_test": 100}}}, path, "unused")
    return path


MLP = {"arch": "mlp", "width": 1.0, "depth": 2, "base_width": 12, "bias": True, "norm": "layernorm",
       "activation": "gelu", "symmetry": {"kind": "w_asymmetric", "sigma_f": 1.0, "n_fixed": 0.25}}


def test_untrained_arm_saves_the_seeded_init(gs_data, tmp_path):
    """train.epochs: 0 (the paper's untrained swap-cost arm): the checkpoint is the seeded initialisation and
    the run row describes it; swap costs run on it like on any model."""
    from lmcflow.checkpoints import init_model, model_spec_for
    from lmcflow.data import load_dataset
    from lmcflow.io import load_tensors

    point = _point("u", MLP, {"swap_costs": True, "n_samples": 200, "heatmap_units": 4})
    point.train["epochs"] = 0
    models = _train_all(point, gs_data, tmp_path)
    init = init_model(model_spec_for(point, load_dataset(gs_data)), 0).state_dict()
    saved, meta = load_tensors(models[0][0])
    assert all(torch.equal(saved[k], init[k]) for k in init) and meta["history"] == []
    row = read_table(models[0][1], "runs").iloc[0]
    assert row.epochs == 0 and np.isnan(row.train_loss_late_drop) and row.train_seconds < 1.0
    assert 0.0 <= row.train_acc <= 1.0 and np.isfinite(row.test_loss)
    run_swap_costs(point, models, str(gs_data), str(tmp_path / "s.parquet"), str(tmp_path / "t.parquet"),
                   device="cpu")
    swap = read_table(tmp_path / "s.parquet", "swap_costs")
    assert (swap.epochs == 0).all() and swap.swap_q10_relative.notna().all()


def test_identifiability_point_mlp(gs_data, tmp_path):
    point = _point("s", MLP, {"identifiability": True, "n_random": 5, "n_samples": 200}, seeds=(0, 1, 2))
    models = _train_all(point, gs_data, tmp_path)
    run_identifiability_block(point, point.pairs, models, str(gs_data), str(tmp_path / "m.parquet"),
                              str(tmp_path / "l.parquet"), device="cpu")
    m = read_table(tmp_path / "m.parquet", "identifiability")
    assert len(m) == 3 * 2 and set(m.layer) == {0, 1} and (m.n_samples == 200).all()
    assert (m.optimal + 1e-6 >= m.identity).all() and (m.data_k == 3).all() and (m.n_fixed == "0.25").all()
    lmc = read_table(tmp_path / "l.parquet", "identifiability_lmc")
    assert len(lmc) == 3 * 2 * 2
    # the aligned path starts at A and ends at (permuted) B: same endpoints as the unaligned one
    wide = lmc.pivot_table(index=["seed_a", "seed_b", "split"], columns="method", values=["loss_a", "loss_b"])
    assert np.allclose(wide["loss_a"]["identity"], wide["loss_a"]["activation_matching"], atol=1e-5)
    assert np.allclose(wide["loss_b"]["identity"], wide["loss_b"]["activation_matching"], atol=1e-5)
    assert (lmc.relative_accuracy_barrier <= 1e-12).all()
    am = lmc[lmc.method == "activation_matching"].matching_objective
    assert (am + 1e-6 >= lmc[lmc.method == "identity"].matching_objective.to_numpy()).all()


def test_identifiability_reads_the_unaligned_paths_of_rule_interpolate(gs_data, tmp_path, monkeypatch):
    """With rule interpolate's file of the pair block the identity paths are read, not evaluated again, and the
    rows are those the job computes itself."""
    point = _point("s", MLP, {"identifiability": True, "n_random": 5, "n_samples": 200}, seeds=(0, 1, 2))
    models = _train_all(point, gs_data, tmp_path)
    run_merge_block(point, point.pairs, ["identity"], models, {}, str(gs_data), str(tmp_path / "i.parquet"),
                    device="cpu")
    calls = []
    evaluate_path = ident_jobs.evaluate_path
    monkeypatch.setattr(ident_jobs, "evaluate_path", lambda *a, **kw: calls.append(1) or evaluate_path(*a, **kw))
    tables = {}
    for name, interpolation in (("own", None), ("read", str(tmp_path / "i.parquet"))):
        calls.clear()
        run_identifiability_block(point, point.pairs, models, str(gs_data), str(tmp_path / f"m-{name}.parquet"),
                                  str(tmp_path / f"l-{name}.parquet"), device="cpu", interpolation=interpolation)
        tables[name] = (read_table(tmp_path / f"l-{name}.parquet", "identifiability_lmc"), len(calls))
    (own, own_calls), (read, read_calls) = tables["own"], tables["read"]
    assert own_calls == 2 * len(point.pairs) and read_calls == len(point.pairs)
    cols = ["loss_a", "loss_b", "loss_mid", "loss_barrier_entezari", "error_barrier_entezari", "acc_min"]
    assert np.allclose(own[cols].to_numpy(), read[cols].to_numpy(), atol=1e-5)


def test_swap_costs_point(gs_data, tmp_path):
    point = _point("s", MLP, {"swap_costs": True, "n_samples": 200, "heatmap_units": 5})
    models = _train_all(point, gs_data, tmp_path)
    run_swap_costs(point, models, str(gs_data), str(tmp_path / "s.parquet"), str(tmp_path / "t.parquet"),
                   device="cpu")
    s = read_table(tmp_path / "s.parquet", "swap_costs")
    assert sorted(s.layer.unique()) == ["layers.0", "layers.1"] and len(s) == 4
    assert (s.k[s.layer == "layers.0"] <= 3).all()  # the data span k = 3 dimensions
    t = read_table(tmp_path / "t.parquet", "swap_matrix")
    assert len(t) == 2 * 2 * 5 * 5
    diag = t[t.i == t.j]
    assert diag.swap_cost.abs().max() < 1e-9


def test_network_variants_jobs_and_figures(gs_data, tmp_path, monkeypatch):
    """SyRe, σ-asymmetric and W-asymmetric BatchNorm MLPs through the identifiability and swap-cost jobs (every
    matching mode; every layer with the post-activation ridge fit), then every figure of the two figure jobs, for
    one variant and for several (the authors' heatmap / LMC comparison)."""
    save = figure_jobs.save_figure
    monkeypatch.setattr(figure_jobs, "save_figure", lambda fig, png, pdf=None: save(fig, png))  # PNG only: time

    analysis = {"identifiability": True, "swap_costs": True, "n_random": 5, "n_samples": 200, "heatmap_units": 4,
                "matching_features": ["post_linear", "post_norm", "post_activation"],
                "matching_similarities": ["pearson", "dot_product"], "swap_layers": "all", "ridge_beta": 0.01,
                "ridge_steps": 3}
    files = {k: [] for k in ("m", "l", "s", "t")}
    for kind, sigma_f in (("syre", 1.0), ("sigma_asymmetric", 0.0), ("w_asymmetric", 0.0)):
        model = {**MLP, "norm": "batchnorm", "symmetry": {"kind": kind, "sigma_f": sigma_f, "n_fixed": 0.25}}
        point = _point("v", model, analysis)
        point.point = kind
        d = tmp_path / kind
        d.mkdir()
        models = _train_all(point, gs_data, d)
        out = {k: str(d / f"{k}.parquet") for k in files}
        run_identifiability_block(point, point.pairs, models, str(gs_data), out["m"], out["l"], device="cpu")
        run_swap_costs(point, models, str(gs_data), out["s"], out["t"], device="cpu")
        for k in files:
            files[k].append(out[k])
        m = read_table(out["m"], "identifiability")
        assert len(m) == 2 * 3 * 2 and (m.optimal + 1e-6 >= m.identity).all()  # layers × features × similarities
        lmc = read_table(out["l"], "identifiability_lmc")
        wide = lmc.pivot_table(index=["split"], columns="method", values="loss_b")
        assert np.allclose(wide["identity"], wide["activation_matching"], atol=1e-5)  # B permuted: same function
        sc = read_table(out["s"], "swap_costs")
        assert list(sc.layer.unique()) == ["layers.0", "layers.1", "head"] and (sc.ridge_steps == 3).all()
        if kind == "w_asymmetric":
            assert (sc.anisotropy_mean > 0).all() and (sc.mask_mean < 1).all()
        else:  # no mask: S_i = I, no anisotropy; the σ-asymmetric weight layers are standard: no swap cost
            assert (sc.anisotropy_max < 1e-9).all() and (sc.mask_mean == 1).all()
        if kind == "sigma_asymmetric":
            assert sc.swap_median.abs().max() < 1e-6 and (sc.sigma_f == 0).all()
    kinds = {"m": "identifiability", "l": "identifiability_lmc", "s": "swap_costs", "t": "swap_matrix"}
    paths = {k: str(tmp_path / f"{k}.parquet") for k in files}
    for k, v in files.items():
        write_table(paths[k], kinds[k], concat_tables(v, kinds[k]))
    outs = {f"{n}_{e}": str(tmp_path / f"{n}.{e}") for n in ("objective", "barrier", "modes") for e in ("png", "pdf")}
    run_identifiability_figures(paths["m"], paths["l"], outs)
    souts = {f"{n}_{e}": str(tmp_path / f"{n}.{e}") for n in ("heatmaps", "summary", "ridge", "ridge_scatter",
                                                               "geometry") for e in ("png", "pdf")}
    run_swap_cost_figures(paths["s"], paths["t"], souts)
    for f in list(outs.values()) + list(souts.values()):
        assert not f.endswith(".png") or Path(f).stat().st_size > 1000, f
    # a single hue level (one matching mode of several variants; one variant): seaborn's dodge divides by zero
    one_m = read_table(paths["m"], "identifiability").query("feature == 'post_activation' and similarity == 'pearson'")
    one_s = read_table(paths["s"], "swap_costs").query("point == 'syre'")
    for fig in (ident_figures.matching_modes(one_m), swap_figures.representation_geometry(one_s)):
        assert fig.axes
        plt.close(fig)


def test_identifiability_point_resnet20_groupnorm(tmp_path):
    """Conv nets: the aligned path permutes W_eff of every conv and the GroupNorm(1) parameters."""
    g = torch.Generator().manual_seed(0)
    n = {"train": 96, "val": 32, "test": 32}
    tensors = {}
    for split, k in n.items():
        tensors[f"x_{split}"] = torch.randn(k, 3, 8, 8, generator=g)
        tensors[f"y_{split}"] = torch.randint(0, 3, (k,), generator=g)
    data_path = tmp_path / "img.safetensors"
    save_tensors(data_path, tensors, {"in_shape": [3, 8, 8], "num_classes": 3, "task": "classification"})
    model = {"arch": "resnet20", "width": 0.25, "bias": True, "norm": "groupnorm", "norm_groups": 1,
             "activation": "relu", "symmetry": {"kind": "w_asymmetric", "sigma_f": 0.5, "n_fixed": 0.125}}
    point = _point("r", model, {"identifiability": True, "n_random": 3, "n_samples": 64, "swap_costs": True})
    point.train["epochs"] = 1
    models = _train_all(point, data_path, tmp_path)
    run_identifiability_block(point, point.pairs, models, str(data_path), str(tmp_path / "m.parquet"),
                              str(tmp_path / "l.parquet"), device="cpu")
    m = read_table(tmp_path / "m.parquet", "identifiability")
    assert len(m) == 19  # stem + 2 features per block × 9 blocks
    run_swap_costs(point, models, str(data_path), str(tmp_path / "s.parquet"), str(tmp_path / "t.parquet"),
                   device="cpu")
    assert len(read_table(tmp_path / "s.parquet", "swap_costs")) == 2 * 21  # 19 convs + 2 shortcuts


def test_coherence_table_from_interpolation(tmp_path):
    paths = {}
    for m in (1, 5):
        paths[f"c{m}"] = tmp_path / f"c{m}.safetensors"
        prepare_dataset(f"c{m}", {"val_size": 0, "split_seed": 0, "synthetic": {f"c{m}": {
            "generator": "coherence", "m": m, "d": 10, "n_train": 300, "n_val": 50, "n_test": 100}}},
            paths[f"c{m}"], "unused")
    model = {"arch": "sum_relu", "width": 1.0, "base_width": 8, "bias": True, "activation": "relu",
             "symmetry": {"kind": "w_asymmetric", "sigma_f": 0.0, "mask_type": "bernoulli", "mask_density": 0.3}}
    merges, points = [], []
    for ds in paths:
        p = _point("c", model, {"coherence": True, "n_samples": 200}, dataset=ds)
        p.point = ds
        (tmp_path / ds).mkdir()
        models = _train_all(p, paths[ds], tmp_path / ds)
        out = tmp_path / f"{ds}.merge.parquet"
        run_merge_block(p, p.pairs, ["identity"], models, {}, str(paths[ds]), str(out), device="cpu")
        merges.append(read_table(out, "interpolation"))
        points.append(p)
    interp = tmp_path / "interp.parquet"
    write_table(interp, "interpolation", pd.concat(merges, ignore_index=True))
    run_coherence_table(points, str(interp), {k: str(v) for k, v in paths.items()}, str(tmp_path / "coh.parquet"))
    coh = read_table(tmp_path / "coh.parquet", "coherence")
    assert len(coh) == 2 * 2  # 2 points × 1 pair × 2 splits
    assert np.allclose(sorted(coh.nu.unique()), [0.2, 1.0]) and np.allclose(coh.nu, coh.data_nu)
    assert (coh.k == 2).all() and coh.regression_midpoint_barrier.notna().all()


def test_subset_indices_seeded_and_sorted():
    a, b = subset_indices(100, 10, 0), subset_indices(100, 10, 0)
    assert torch.equal(a, b) and len(a.unique()) == 10 and torch.equal(a, a.sort().values)
    assert not torch.equal(a, subset_indices(100, 10, 1))
    with pytest.raises(ValueError, match="n_train"):
        subset_indices(100, 101, 0)


@pytest.mark.fmnist
def test_fashion_mnist_subset_shares_val_and_test(tmp_path):
    cfg = {"search_paths": ["/usr/share/datasets/fashion-mnist"], "download": False, "val_size": 5000,
           "split_seed": 0, "subsets": {"fm1k": {"base": "fashion_mnist", "n_train": 1000}}}
    prepare_dataset("fm1k", cfg, tmp_path / "fm1k.safetensors", tmp_path / "raw")
    d = load_dataset(tmp_path / "fm1k.safetensors")
    assert {s: len(d.y[s]) for s in d.y} == {"train": 1000, "val": 5000, "test": 10000}
    assert d.meta["base"] == "fashion_mnist" and abs(float(d.x["train"].mean())) < 1e-4


def test_new_tables_lead_with_point_columns():
    for kind in ("identifiability", "identifiability_lmc", "swap_costs", "swap_matrix", "coherence"):
        assert TABLES[kind][:len(IDENT_POINT_COLUMNS)] == IDENT_POINT_COLUMNS
