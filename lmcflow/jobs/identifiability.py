"""The identifiability paper's compute jobs: rules ``identifiability`` (activation matching and aligned LMC on
effective weights), ``swap_costs`` and ``coherence_table``."""
from __future__ import annotations

import copy
import logging
import time
from typing import TYPE_CHECKING

from lmcflow import identifiability as ident
from lmcflow.alignment import align, apply_permutation, permutation_spec
from lmcflow.checkpoints import as_point, load_checkpoint, load_datasets, load_models
from lmcflow.config import Point, analysis_params, lambda_grid
from lmcflow.data import load_dataset
from lmcflow.evaluation import resolve_device
from lmcflow.merging import check_same_function, endpoint_outputs, evaluate_path
from lmcflow.metrics import barriers
from lmcflow.payloads import ModelsEntry
from lmcflow.symmetry import effective_state_dict
from lmcflow.tables import ident_point_columns, plain_merges, read_table, write_table

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


def run_identifiability_block(point: Point, pairs: list, models: dict, data_path: str, out_matching: str,
                              out_lmc: str, device: str = "auto", interpolation: str | None = None) -> None:
    """``run_identifiability_group`` for one point."""
    run_identifiability_group([ModelsEntry(point=point, models=models)], pairs, {as_point(point).dataset: data_path},
                              out_matching, out_lmc, device, interpolation)


def run_identifiability_group(entries: list[ModelsEntry], pairs: list, data: dict, out_matching: str,
                              out_lmc: str, device: str = "auto", interpolation: str | None = None) -> None:
    """Rule ``identifiability``: ``identifiability_rows`` of every point of a grid group for one pair block.
    ``entries``: one ``lmcflow.payloads.ModelsEntry`` per point (``PLAN.ident.entries``); ``interpolation``: rule
    interpolate's file of the group and pair block (its identity paths are read, not evaluated again)."""
    dev = resolve_device(device)
    points = [as_point(e["point"]) for e in entries]
    datasets = load_datasets(data, points, dev)
    # read once for every point
    interp = plain_merges(read_table(interpolation, "interpolation")) if interpolation else None
    matching, lmc = [], []
    for point, e in zip(points, entries, strict=True):
        m, l_ = identifiability_rows(point, pairs, e["models"], datasets[point.dataset], dev, interp)
        matching += m
        lmc += l_
    write_table(out_matching, "identifiability", matching)
    write_table(out_lmc, "identifiability_lmc", lmc)


def identifiability_rows(point: Point, pairs: list, models: dict, data, dev,
                         interpolation: pd.DataFrame | None = None) -> tuple[list[dict], list[dict]]:
    """For every seed pair of a pair block: activation-matching objective per hidden layer (at every feature
    point of ``analysis.matching_features``, with every similarity of ``analysis.matching_similarities``), and
    unaligned vs aligned LMC on effective weights. ``models``: {seed: [checkpoint, run row]}.

    Similarities use the first ``analysis.n_samples`` training inputs. The aligned path
    permutes B by activation matching (``lmcflow.alignment.align``) and interpolates the
    *effective* weights (``symmetry.effective_state_dict``: W_eff = D⊙W + (1−D)⊙F, masks 1,
    offsets 0), so a W-asymmetric B is permuted as a whole and stays the same function.
    The unaligned path interpolates the effective weights too (identical to interpolating
    the raw weights, since both models share masks and offsets). ``interpolation``: rule interpolate's table of
    the same pair block, whose identity paths are that same path (same λ grid and evaluation sizes; dense form)
    and are used instead of evaluated again; without it (or without identity rows) the path is evaluated here.
    """
    a = analysis_params(point)
    models = load_models(models, dev)
    x = data.x["train"][: int(a["n_samples"])]
    lambdas = lambda_grid(int(point.merge["lambdas"]))
    eval_sizes = {"train_eval_size": point.merge["train_eval_size"], "bn_reset_size": point.merge["bn_reset_size"]}
    unaligned = _identity_paths(interpolation, lambdas, point)
    ends = {}  # each model's outputs: the endpoints of its paths (evaluated once per job)
    matching, lmc = [], []
    for seed_a, seed_b in pairs:
        t0 = time.perf_counter()
        model_a, model_b = models[seed_a], models[seed_b]
        for seed in (seed_a, seed_b):
            if seed not in ends:
                ends[seed] = endpoint_outputs(models[seed], data, **eval_sizes)
        base = {**ident_point_columns(point, data.meta), "seed_a": seed_a, "seed_b": seed_b}
        rows = ident.activation_matching_rows(model_a, model_b, x, n_random=int(a["n_random"]),
                                              seed=f"{seed_a}-{seed_b}", features=a["matching_features"],
                                              similarities=a["matching_similarities"])
        matching += [{**base, "n_samples": len(x), **r} for r in rows]
        for r in rows:
            log.info(f"[identifiability] pair ({seed_a},{seed_b}) layer {r['layer']} {r['feature']}/{r['similarity']}: "
                     f"optimal={r['optimal']:.4f} identity={r['identity']:.4f} random={r['random_mean']:.4f} "
                     f"normalized={r['identity_normalized']:.3f}")
        # the aligned path's objective: post-activation Pearson, what activation matching aligns by
        layers = [r for r in rows if r["feature"] == "post_activation" and r["similarity"] == "pearson"]
        if not layers:
            layers = ident.activation_matching_rows(model_a, model_b, x, n_random=0)
        perms, info = align("activation_matching", model_a, model_b, x)
        eff_a, eff_b = effective_state_dict(model_a), effective_state_dict(model_b)
        eff_b_aligned = apply_permutation(permutation_spec(model_b), eff_b, perms)
        n_units = sum(r["n_units"] for r in layers)
        objective = {"identity": sum(r["identity"] * r["n_units"] for r in layers) / max(1, n_units),
                     "activation_matching": float(info["objective"])}
        net = copy.deepcopy(model_a)  # evaluate_path loads every θ(λ) into it
        check_same_function(net, eff_b, eff_b_aligned, data.x["test"][:256],
                            f"{point.study}/{point.point} pair ({seed_a},{seed_b}) activation matching")
        for method, sd_b in (("identity", eff_b), ("activation_matching", eff_b_aligned)):
            path = unaligned.get((seed_a, seed_b)) if method == "identity" else None
            if path is None:
                path = evaluate_path(net, eff_a, sd_b, data, lambdas, **eval_sizes,
                                     endpoints={0.0: ends[seed_a], 1.0: ends[seed_b]})
            for split in ("train", "test"):
                row = ident.lmc_summary_row(path, split)
                lmc.append({**base, "method": method, "matching_objective": objective[method], **row})
                log.info(f"[identifiability] pair ({seed_a},{seed_b}) {method} {split}: error barrier (entezari)="
                    f"{row['error_barrier_entezari']:.4f} loss barrier={row['loss_barrier_entezari']:.4f} "
                    f"rel. acc barrier={row['relative_accuracy_barrier']:.4f}")
        log.info(f"[identifiability] {point.study}/{point.point} pair ({seed_a},{seed_b}) done in "
            f"{time.perf_counter() - t0:.1f}s")
    return matching, lmc


def _identity_paths(interpolation: pd.DataFrame | None, lambdas: list[float], point: Point) -> dict:
    """{(seed_a, seed_b): identity path rows} of ``point`` in rule interpolate's table, for pairs evaluated on
    ``lambdas``."""
    if interpolation is None:
        return {}
    df = interpolation
    df = df[(df["method"] == "identity") & (df["study"] == point.study) & (df["point"] == point.point)]
    out = {}
    for (a, b), g in df.groupby(["seed_a", "seed_b"]):
        if sorted(g["lam"].unique().tolist()) == sorted(lambdas):
            out[(int(a), int(b))] = g[["lam", "split", "loss", "acc", "error"]].to_dict("records")
    return out


def run_swap_costs(point: Point, models: dict, data_path: str, out_summary: str, out_matrix: str,
                   device: str = "auto") -> None:
    """``run_swap_costs_group`` for one point."""
    run_swap_costs_group([ModelsEntry(point=point, models=models)], {as_point(point).dataset: data_path}, out_summary,
                         out_matrix, device)


def run_swap_costs_group(entries: list[ModelsEntry], data: dict, out_summary: str, out_matrix: str,
                         device: str = "auto") -> None:
    """Rule ``swap_costs``: ``swap_cost_rows`` of every point of a grid group for one seed block. ``entries``: one
    ``lmcflow.payloads.ModelsEntry`` per point (``PLAN.ident.swap_entries``)."""
    dev = resolve_device(device)
    points = [as_point(e["point"]) for e in entries]
    datasets = load_datasets(data, points, dev)
    summary, matrix = [], []
    for point, e in zip(points, entries, strict=True):
        s_, m = swap_cost_rows(point, e["models"], datasets[point.dataset], dev)
        summary += s_
        matrix += m
    write_table(out_summary, "swap_costs", summary)
    write_table(out_matrix, "swap_matrix", matrix)


def swap_cost_rows(point: Point, models: dict, data, dev) -> tuple[list[dict], list[dict]]:
    """Realization / swap costs of the weight layers of each model (``identifiability.swap_cost_analysis``:
    hidden layers, or with ``analysis.swap_layers: all`` the output layer too), with the coherence and anisotropy of
    each layer's input subspace and, with ``analysis.ridge_beta``, the ridge-regression estimate beside the closed
    form; ``models``: {seed: [checkpoint, run row]}."""
    a = analysis_params(point)
    x = data.x["train"][: int(a["n_samples"])]
    beta = a["ridge_beta"]
    ridge_cols = {"ridge_beta": float("nan") if beta is None else float(beta), "ridge_steps": int(a["ridge_steps"])}
    no_ridge = dict.fromkeys(("self_cost_mean_ridge", "swap_median_ridge", "swap_q10_ridge", "swap_frac_negative_ridge",
                              "swap_q10_relative_ridge", "ridge_closed_form_spearman"), float("nan"))
    summary, matrix = [], []
    for seed in sorted(models, key=int):
        model, _ = load_checkpoint(*models[seed], dev)
        t0 = time.perf_counter()
        rows, mats = ident.swap_cost_analysis(
            model, x, names="all" if a["swap_layers"] == "all" else None, var_threshold=float(a["var_threshold"]),
            max_samples=int(a["n_samples"]), ridge_beta=beta, ridge_steps=int(a["ridge_steps"]),
            ridge_lr=float(a["ridge_lr"]), anisotropy_delta=float(a["anisotropy_delta"]), device=dev)
        base = {**ident_point_columns(point, data.meta), "seed": int(seed)}
        summary += [{**base, **no_ridge, **r, **ridge_cols} for r in rows]
        matrix += [{**base, **r} for name, (t, t_ridge) in mats.items()
                   for r in ident.swap_cost_long(t, name, int(a["heatmap_units"]), t_ridge)]
        for r in rows:
            log.info(f"[swap] {point.study}/{point.point} seed={seed} {r['layer']}: k={r['k']} "
                     f"median={r['swap_median']:.4g} frac_negative={r['swap_frac_negative']:.3f} "
                     f"relative={r['swap_median_relative']:.4g} ν={r['input_coherence']:.3g} "
                     f"anisotropy={r['anisotropy_mean']:.3g} (bound {r['anisotropy_bound']:.3g})"
                     + (f" ridge median={r['swap_median_ridge']:.4g} ρ={r['ridge_closed_form_spearman']:.3f}"
                        if beta is not None else ""))
        log.info(f"[swap] {point.study}/{point.point} seed={seed} done in {time.perf_counter() - t0:.1f}s")
    return summary, matrix


def run_coherence_table(points: list[Point], interp_path: str, data: dict, out: str) -> None:
    """Subspace coherence ν of each point's inputs and the barriers of its interpolation curves.

    ν is measured on the principal subspace (``analysis.var_threshold`` of the variance) of the
    first ``analysis.n_samples`` training inputs; curves come from the study's foundation
    ``interpolation`` table (every method and split it holds).
    """
    interp = plain_merges(read_table(interp_path, "interpolation"))
    rows, geometry = [], {}
    for p in points:
        a = analysis_params(p)
        if not a["coherence"]:
            continue
        key = (p.dataset, int(a["n_samples"]), float(a["var_threshold"]))
        if key not in geometry:
            dataset = load_dataset(data[p.dataset])
            u, explained = ident.principal_subspace(dataset.x["train"][: key[1]], key[2])
            mean = dataset.y["train"].double().mean()  # the mean predictor: what a fit must beat (its MSE per split)
            baseline = {s: float(((y.double() - mean) ** 2).mean()) for s, y in dataset.y.items() if len(y)}
            geometry[key] = (dataset.meta, {**ident.coherence_row(u), "explained": explained,
                                         "embedding": str(dataset.meta.get("embedding", ""))}, baseline)
        meta, geo, baseline = geometry[key]
        base = ident_point_columns(p, meta)
        curves = interp[(interp.study == p.study) & (interp.point == p.point)]
        for (sa, sb, method, split), g in curves.groupby(["seed_a", "seed_b", "method", "split"], sort=True):
            g = g.sort_values("lam")
            lam, loss = g.lam.to_numpy(float), g.loss.to_numpy(float)
            mid = int(abs(lam - 0.5).argmin())
            rows.append({**base, "seed_a": int(sa), "seed_b": int(sb), "method": method, "split": split, **geo,
                         "loss_a": float(loss[0]), "loss_b": float(loss[-1]), "loss_mid": float(loss[mid]),
                         "baseline_mse": baseline.get(split, float("nan")),
                         "regression_midpoint_barrier": ident.regression_midpoint_barrier(lam, loss),
                         "loss_barrier_midpoint": barriers(lam, loss)["midpoint"]})
        log.info(f"[coherence] {p.study}/{p.point}: nu={geo['nu']:.4f} (k={geo['k']}, d={geo['d']})")
    write_table(out, "coherence", rows)
