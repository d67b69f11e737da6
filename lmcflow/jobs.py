"""One function per compute job (data, training, merging, alignment, analyses). Snakemake
``script:`` files only unpack ``snakemake.input/output/params`` and call these; everything here
is plain Python and testable without Snakemake. Jobs that only read tables (aggregation,
claims, figures) live in ``lmcflow.report_jobs``, which imports no torch.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from lmcflow import kernels
from lmcflow.config import Point, lambda_grid
from lmcflow.data import load_dataset, prepare_dataset
from lmcflow.io import load_tensors, save_tensors
from lmcflow.merging import check_same_function, endpoint_outputs, evaluate_path
from lmcflow.models import ModelSpec, build_model, count_parameters
from lmcflow.seeding import derive_seed
from lmcflow.tables import point_columns, read_table, write_table
from lmcflow.training import evaluate, late_loss_drop, resolve_device, resolve_precision, train

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- data
def run_prepare_data(dataset: str, data_cfg: dict, out: str, cache_root: str) -> None:
    prepare_dataset(dataset, data_cfg, out, cache_root)


# --------------------------------------------------------------------------- training
def model_spec_for(point: Point, data) -> ModelSpec:
    m = {k: v for k, v in point.model.items() if k in ModelSpec.__dataclass_fields__}
    return ModelSpec(in_shape=data.in_shape, num_classes=data.num_classes, **m)


def init_model(spec: ModelSpec, seed: int) -> torch.nn.Module:
    """Model init from an explicit seed (fork the global RNG so nothing else is disturbed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed("init", seed))
        return build_model(spec)


def train_digest(point: Point, seed: int, data_meta: dict, precision: str) -> str:
    """SHA-256 of everything that decides a trained model: dataset (name and prepared-file metadata,
    which holds its sizes and normalisation statistics), model block, train settings (without
    execution-only keys such as resources, checkpoint_every and bundle), seed and the precision
    actually used. Stored in resumable states: a state of another digest is never resumed."""
    from lmcflow.config import learning_settings

    payload = {"dataset": point.dataset, "data": data_meta, "model": point.model,
               "train": learning_settings(point.train), "seed": int(seed), "precision": precision}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def state_path_for(ckpt: str, point: Point, seed: int, state_dir: str | None = None) -> Path:
    """Resumable training state of a model: beside its checkpoint, or under ``state_dir``."""
    if state_dir is None:
        return Path(ckpt).with_name(Path(ckpt).stem + ".state.safetensors")
    return Path(state_dir) / point.study / point.point / f"seed-{seed}.state.safetensors"


def run_label(point: Point, seed: int) -> str:
    return f"{point.study}/{point.point}/seed-{seed}"


def default_bundle_id(members: list[tuple[Point, int]]) -> str:
    """``study/point/seed-S`` for one model, ``study/point/seeds-0+1+2`` for seeds of one point, else
    ``bundle-<12 hex digits of the SHA-256 of the sorted member labels>``."""
    if len(members) == 1:
        return run_label(*members[0])
    if len({(p.study, p.point) for p, _ in members}) == 1:
        p = members[0][0]
        return f"{p.study}/{p.point}/seeds-{'+'.join(str(s) for s in sorted(s for _, s in members))}"
    labels = "\n".join(sorted(run_label(p, s) for p, s in members))
    return "bundle-" + hashlib.sha256(labels.encode()).hexdigest()[:12]


def run_train(point: Point, seed: int, data_path: str, out_ckpt: str, out_row: str, device: str = "auto") -> dict:
    t0 = time.perf_counter()
    dev = resolve_device(device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    data = load_dataset(data_path).to(dev)
    spec = model_spec_for(point, data)
    model = init_model(spec, seed).to(dev)
    log.info(f"[train] {point.study}/{point.point} seed={seed} arch={spec.arch} width={spec.width} "
        f"params={count_parameters(model)} device={dev}")
    state_path = state_path_for(out_ckpt, point, seed)
    digest = train_digest(point, seed, data.meta, resolve_precision(point.train.get("precision", "auto"), dev))
    info = train(model, data, point.train, seed, dev, state_path=state_path, state_digest=digest,
                 name=f"{point.study}/{point.point} seed={seed}")
    return _write_trained(point, seed, spec, model, data, info, out_ckpt, out_row, dev, run_label(point, seed), t0)


def _write_trained(point: Point, seed: int, spec: ModelSpec, model, data, info: dict, out_ckpt: str, out_row: str,
                   dev, bundle_id: str, t0: float) -> dict:
    """Checkpoint (safetensors: weights + spec, point, seed, history; nothing host- or time-dependent),
    its SHA-256, and the model's one-row ``runs`` table (timings and host live only there)."""
    metrics = {s: evaluate(model, data.x[s], data.y[s], data.task) for s in ("train", "val", "test")}
    meta = {"model_spec": spec.to_dict(), "study": point.study, "point": point.point, "seed": seed,
            "history": info["history"]}
    digest = save_tensors(out_ckpt, model.state_dict(), meta)
    row = {**point_columns(point), "seed": seed, "n_params": count_parameters(model),
           **{f"{s}_{k}": v for s, m in metrics.items() for k, v in m.items()},
           "train_loss_late_drop": late_loss_drop(info["history"]),
           "wall_time_s": time.perf_counter() - t0, "train_seconds": info["train_seconds"],
           "device": _device_name(dev),
           "precision": info["precision"], "checkpoint": str(out_ckpt), "checkpoint_sha256": digest,
           "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""), "bundle_id": bundle_id, **kernels.check()}
    write_table(out_row, "runs", [row])
    log.info(f"[train] {point.study}/{point.point} seed={seed} done: test acc={metrics['test']['acc']:.4f} "
        f"loss={metrics['test']['loss']:.4f} sha256={digest[:12]}")
    return row


def run_train_bundle(members: list[dict], data_paths: dict, device: str = "auto", state_dir: str | None = None,
                     bundle_id: str | None = None) -> list[dict]:
    """Train several models as one bundle (``lmcflow.stacking.train_bundle``) and write, for each, exactly
    what ``run_train`` writes for it: its checkpoint, SHA-256 and one-row ``runs`` table.

    ``members``: one dict per model, ``{"point": Point (or its dict), "seed": int, "ckpt": checkpoint
    path, "row": run-row path}``; models and train settings must agree (``bundle.check_bundle``).
    ``data_paths``: dataset name -> prepared data file (each loaded once). ``state_dir``: where the
    resumable states go (None: beside each checkpoint, as ``run_train``). ``bundle_id``: the
    ``bundle_id`` column (default ``default_bundle_id``). Returns the run rows of the written models.
    A bundle of one trains exactly as ``run_train``. If members diverge, the healthy ones are written
    (and their final states kept) before ``DivergenceError`` names the diverged points and seeds.
    """
    return run_train_group([members], data_paths, device, state_dir, [bundle_id])


def run_train_group(bundles: list[list[dict]], data_paths: dict, device: str = "auto", state_dir: str | None = None,
                    bundle_ids: list | None = None) -> list[dict]:
    """Rule ``train``: the bundles of one seed block of a grid group (``lmcflow.grouping.grid_groups``), one after
    the other in this process, each as ``run_train_bundle`` trains it (members as there; every dataset is loaded
    once). A bundle whose members diverge does not stop the others: every healthy model is written, then one
    ``DivergenceError`` names every diverged point and seed."""
    from lmcflow.training import DivergenceError

    t0 = time.perf_counter()
    if not bundles or not all(bundles):
        raise ValueError("run_train_group: every bundle needs at least one member")
    dev = resolve_device(device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    stacks = [[(_as_point(m["point"]), int(m["seed"]), str(m["ckpt"]), str(m["row"])) for m in members]
              for members in bundles]
    datasets = load_datasets(data_paths, [p for entries in stacks for p, *_ in entries], dev)
    rows, failures = [], []
    for entries, bid in zip(stacks, bundle_ids or [None] * len(stacks), strict=True):
        try:
            rows += _train_one_bundle(entries, datasets, dev, state_dir, bid, t0)
        except DivergenceError as err:
            failures.append(err)
    if len(failures) == 1:
        raise failures[0]
    if failures:
        raise DivergenceError(" | ".join(str(err) for err in failures),
                              diverged=[d for err in failures for d in err.diverged],
                              results=[r for err in failures for r in err.results])
    return rows


def _train_one_bundle(entries: list[tuple], datasets: dict, dev, state_dir, bundle_id, t0: float) -> list[dict]:
    from lmcflow.stacking import Member, train_bundle
    from lmcflow.training import DivergenceError

    bid = bundle_id or default_bundle_id([(p, s) for p, s, *_ in entries])
    bundle, specs = [], []
    for point, seed, ckpt, _ in entries:
        data = datasets[point.dataset]
        spec = model_spec_for(point, data)
        specs.append(spec)
        precision = resolve_precision(point.train.get("precision", "auto"), dev)
        bundle.append(Member(model=init_model(spec, seed).to(dev), data=data, seed=seed, cfg=point.train,
                             name=f"{point.study}/{point.point} seed={seed}",
                             state_path=state_path_for(ckpt, point, seed, state_dir),
                             digest=train_digest(point, seed, data.meta, precision)))
    log.info(f"[train] bundle {bid}: {len(bundle)} models arch={specs[0].arch} width={specs[0].width} "
             f"params={count_parameters(bundle[0].model)} each, device={dev}")
    failure = None
    try:
        results = train_bundle(bundle, dev)
    except DivergenceError as err:
        if not err.results:
            raise
        failure, results = err, err.results
    rows = []
    for (point, seed, ckpt, row_path), spec, member, res in zip(entries, specs, bundle, results, strict=True):
        if res["diverged"] is None:
            rows.append(_write_trained(point, seed, spec, member.model, member.data, res, ckpt, row_path, dev,
                                       bid, t0))
    if failure is not None:
        raise failure
    return rows


def load_checkpoint(ckpt_path: str, run_row_path: str, device) -> tuple[torch.nn.Module, dict]:
    """Rebuild a trained model, verifying the checkpoint against the hash recorded at training."""
    row = read_table(run_row_path, "runs").iloc[0]
    sd, meta = load_tensors(ckpt_path, expected_sha256=row["checkpoint_sha256"],
                            rebuild_hint=f"rule train (delete it, then rerun snakemake; it retrains "
                                         f"{meta_hint(ckpt_path)})")
    model = build_model(ModelSpec.from_dict(meta["model_spec"]))
    model.load_state_dict(sd)
    return model.to(device), {k: v.to(device) for k, v in sd.items()}


def meta_hint(path) -> str:
    return f"seed file {Path(path).name}"


# --------------------------------------------------------------------------- merging
def load_models(models: dict, device) -> dict[int, torch.nn.Module]:
    """{seed: model} from {seed: [checkpoint, run row]}, each checkpoint verified against its recorded hash."""
    return {int(s): load_checkpoint(ckpt, row, device)[0] for s, (ckpt, row) in models.items()}


def _as_point(p) -> Point:
    return p if isinstance(p, Point) else Point.from_dict(p)


def load_datasets(data_paths: dict, points: list[Point], dev) -> dict:
    """{dataset name: Dataset on ``dev``} for the datasets of ``points``, each loaded once."""
    names = sorted({p.dataset for p in points})
    missing = [n for n in names if n not in data_paths]
    if missing:
        raise ValueError(f"no prepared data file given for dataset(s) {missing}")
    return {n: load_dataset(data_paths[n]).to(dev) for n in names}


def run_merge_block(point: Point, pairs: list, methods: list, models: dict, alignment: dict, data_path: str,
                    out: str, device: str = "auto") -> None:
    """``run_merge_group`` for one point."""
    run_merge_group([{"point": point, "methods": methods, "models": models, "alignment": alignment}], pairs,
                    {_as_point(point).dataset: data_path}, out, device)


def run_merge_group(entries: list[dict], pairs: list, data_paths: dict, out: str, device: str = "auto") -> None:
    """Rule ``interpolate``: the paths of every point of a grid group (``lmcflow.grouping.grid_groups``) for one
    pair block, in one file. ``entries``: per point ``{"point", "methods", "models": {seed: [checkpoint, run
    row]}, "alignment": {method: [permutation file, alignment rows]}}``; ``data_paths``: dataset -> prepared
    file (each dataset loaded once)."""
    dev = resolve_device(device)
    points = [_as_point(e["point"]) for e in entries]
    datasets = load_datasets(data_paths, points, dev)
    rows = []
    for point, e in zip(points, entries, strict=True):
        rows += merge_rows(point, pairs, e["methods"], e["models"], e.get("alignment") or {}, datasets[point.dataset],
                           dev)
    write_table(out, "interpolation", rows)


def merge_rows(point: Point, pairs: list, methods: list, models: dict, alignment: dict, data, dev) -> list[dict]:
    """Paths θ(λ) = (1−λ)θ_A + λθ_B of every seed pair of a pair block, for every merge method. For method ≠
    identity, B is first permuted by rule ``align``'s permutations (``alignment``: {method: [permutation
    file, alignment rows]}, hash-verified); models with symmetry-breaking layers are interpolated in dense
    form (W_eff). Each model is loaded once."""
    loaded = load_models(models, dev)
    perms = {m: load_alignment_block(point, m, *alignment[m]) for m in methods if m != "identity"}
    lambdas = lambda_grid(int(point.merge["lambdas"]))
    eval_sizes = {"train_eval_size": point.merge["train_eval_size"], "bn_reset_size": point.merge["bn_reset_size"]}
    ends = {}  # each model's outputs, the endpoint of every path it ends (evaluated once per job)
    rows = []
    for seed_a, seed_b in pairs:
        for seed in (seed_a, seed_b):
            if seed not in ends:
                ends[seed] = endpoint_outputs(loaded[seed], data, **eval_sizes)
        for method in methods:
            t0 = time.perf_counter()
            perm = perms.get(method, {}).get((seed_a, seed_b))
            model_a, model_b, _ = aligned_pair(loaded[seed_a], loaded[seed_b], perm)
            sd_a = {k: v.clone() for k, v in model_a.state_dict().items()}  # evaluate_path loads θ(λ) into model_a
            sd_b = model_b.state_dict()
            if perm is not None:
                _, unpermuted_b, _ = aligned_pair(loaded[seed_a], loaded[seed_b], None)
                check_same_function(model_a, unpermuted_b.state_dict(), sd_b, data.x["test"][:256],
                                    f"{point.study}/{point.point} pair ({seed_a},{seed_b}) {method}")
            path = evaluate_path(model_a, sd_a, sd_b, data, lambdas, **eval_sizes,
                                 endpoints={0.0: ends[seed_a], 1.0: ends[seed_b]})
            base = {**point_columns(point), "seed_a": seed_a, "seed_b": seed_b, "method": method}
            rows += [{**base, **r} for r in path]
            mid = [r for r in path if r["split"] == "test" and abs(r["lam"] - 0.5) < 1e-9][0]
            log.info(f"[merge] {point.study}/{point.point} pair ({seed_a},{seed_b}) {method}: test error at λ=½ "
                     f"{mid['error']:.4f}, {len(lambdas)} λ in {time.perf_counter() - t0:.1f}s")
    return rows


# --------------------------------------------------------------------------- identifiability paper
def _ident_imports():
    from lmcflow import identifiability as ident
    from lmcflow.config import analysis_params
    from lmcflow.tables import ident_point_columns
    return ident, analysis_params, ident_point_columns


def run_identifiability_block(point: Point, pairs: list, models: dict, data_path: str, out_matching: str,
                              out_lmc: str, device: str = "auto", interpolation: str | None = None) -> None:
    """``run_identifiability_group`` for one point."""
    run_identifiability_group([{"point": point, "models": models}], pairs, {_as_point(point).dataset: data_path},
                              out_matching, out_lmc, device, interpolation)


def run_identifiability_group(entries: list[dict], pairs: list, data_paths: dict, out_matching: str, out_lmc: str,
                              device: str = "auto", interpolation: str | None = None) -> None:
    """Rule ``identifiability``: ``identifiability_rows`` of every point of a grid group for one pair block.
    ``entries``: per point ``{"point", "models": {seed: [checkpoint, run row]}}``; ``interpolation``: rule
    interpolate's file of the group and pair block (its identity paths are read, not evaluated again)."""
    dev = resolve_device(device)
    points = [_as_point(e["point"]) for e in entries]
    datasets = load_datasets(data_paths, points, dev)
    interp = read_table(interpolation, "interpolation") if interpolation else None  # read once for every point
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
    from lmcflow.alignment import align, apply_permutation, permutation_spec
    from lmcflow.symmetry import effective_state_dict

    ident, analysis_params, ident_point_columns = _ident_imports()
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
    run_swap_costs_group([{"point": point, "models": models}], {_as_point(point).dataset: data_path}, out_summary,
                         out_matrix, device)


def run_swap_costs_group(entries: list[dict], data_paths: dict, out_summary: str, out_matrix: str,
                         device: str = "auto") -> None:
    """Rule ``swap_costs``: ``swap_cost_rows`` of every point of a grid group for one seed block. ``entries``: per
    point ``{"point", "models": {seed: [checkpoint, run row]}}``."""
    dev = resolve_device(device)
    points = [_as_point(e["point"]) for e in entries]
    datasets = load_datasets(data_paths, points, dev)
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
    ident, analysis_params, ident_point_columns = _ident_imports()
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


def run_coherence_table(points: list[Point], interp_path: str, data_paths: dict, out: str) -> None:
    """Subspace coherence ν of each point's inputs and the barriers of its interpolation curves.

    ν is measured on the principal subspace (``analysis.var_threshold`` of the variance) of the
    first ``analysis.n_samples`` training inputs; curves come from the study's foundation
    ``interpolation`` table (every method and split it holds).
    """
    ident, analysis_params, ident_point_columns = _ident_imports()
    from lmcflow.metrics import barriers

    interp = read_table(interp_path, "interpolation")
    rows, geometry = [], {}
    for p in points:
        a = analysis_params(p)
        if not a["coherence"]:
            continue
        key = (p.dataset, int(a["n_samples"]), float(a["var_threshold"]))
        if key not in geometry:
            data = load_dataset(data_paths[p.dataset])
            u, explained = ident.principal_subspace(data.x["train"][: key[1]], key[2])
            geometry[key] = (data.meta, {**ident.coherence_row(u), "explained": explained,
                                         "embedding": str(data.meta.get("embedding", ""))})
        meta, geo = geometry[key]
        base = ident_point_columns(p, meta)
        curves = interp[(interp.study == p.study) & (interp.point == p.point)]
        for (sa, sb, method, split), g in curves.groupby(["seed_a", "seed_b", "method", "split"], sort=True):
            g = g.sort_values("lam")
            lam, loss = g.lam.to_numpy(float), g.loss.to_numpy(float)
            mid = int(abs(lam - 0.5).argmin())
            rows.append({**base, "seed_a": int(sa), "seed_b": int(sb), "method": method, "split": split, **geo,
                         "loss_a": float(loss[0]), "loss_b": float(loss[-1]), "loss_mid": float(loss[mid]),
                         "regression_midpoint_barrier": ident.regression_midpoint_barrier(lam, loss),
                         "loss_barrier_midpoint": barriers(lam, loss)["midpoint"]})
        log.info(f"[coherence] {p.study}/{p.point}: nu={geo['nu']:.4f} (k={geo['k']}, d={geo['d']})")
    write_table(out, "coherence", rows)


# --------------------------------------------------------------------------- alignment and mechanism
def _device_name(dev: torch.device) -> str:
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or platform.machine()
    return f"{dev.type}:{name}"


def run_align_block(point: Point, method: str, pairs: list, models: dict, data_path: str, out_perms: str,
                    out_rows: str, device: str = "auto") -> None:
    """Permutations aligning model B to model A (``lmcflow.alignment.align``) for every seed pair of a pair block,
    saved together as one safetensors file (``lmcflow.alignment.save_permutation_sets``); one alignment row per pair.

    Models with symmetry-breaking layers are aligned in dense form (W_eff, see
    ``alignment.to_dense_form``). The file's SHA-256 goes into every row; ``load_alignment_block``
    checks it before the permutations are applied. The file holds nothing but the permutations and
    what determines them (no timings: the same computation gives the same bytes).
    """
    from lmcflow.alignment import align, save_permutation_sets, to_dense_form
    from lmcflow.config import alignment_params

    dev = resolve_device(device)
    ap = alignment_params(point)
    loaded = load_models(models, dev)
    x, kw = None, {}
    if method == "activation_matching":
        xtr = load_dataset(data_path).x["train"]
        x = (xtr[: int(ap["samples"])] if ap["samples"] else xtr).to(dev)
        kw["batch_size"] = int(ap["batch_size"])
    elif method == "weight_matching":
        kw["max_iter"] = int(ap["max_iter"])
    sets, rows, dense = {}, [], False
    for seed_a, seed_b in pairs:
        t0 = time.perf_counter()
        model_a, model_b = copy.deepcopy(loaded[seed_a]), copy.deepcopy(loaded[seed_b])
        dense = to_dense_form(model_a)
        to_dense_form(model_b)
        seed = derive_seed("align", point.study, point.point, method, seed_a, seed_b)
        perms, info = align(method, model_a, model_b, x, seed=seed, **kw)
        sets[(seed_a, seed_b)] = perms
        n_units = sum(len(p) for p in perms.values())
        unmoved = sum(int((p.cpu() == torch.arange(len(p))).sum()) for p in perms.values())
        history = info.get("objective_history") or []
        rows.append({**point_columns(point), "seed_a": seed_a, "seed_b": seed_b, "method": method,
                     "objective": float(info["objective"]),
                     "objective_identity": float(history[0]) if history else float("nan"),
                     "iterations": int(info["iterations"]), "align_seconds": float(info["seconds"]),
                     "wall_time_s": time.perf_counter() - t0, "n_groups": len(perms), "n_units": n_units,
                     "frac_unmoved": unmoved / max(1, n_units), "n_samples": 0 if x is None else len(x),
                     "dense_form": dense, "device": _device_name(dev)})
        log.info(f"[align] {point.study}/{point.point} pair ({seed_a},{seed_b}) {method}: objective "
                 f"{rows[-1]['objective']:.6g} (identity {rows[-1]['objective_identity']:.6g}), "
                 f"{rows[-1]['iterations']} iterations, {rows[-1]['frac_unmoved']:.3f} of units unmoved, "
                 f"{rows[-1]['align_seconds']:.2f}s")
    meta = {"study": point.study, "point": point.point, "method": method, "dense_form": dense,
            "samples": 0 if x is None else len(x)}
    digest = save_permutation_sets(out_perms, sets, meta)
    for r in rows:
        r.update(permutation_file=str(out_perms), permutation_sha256=digest)
    write_table(out_rows, "alignment", rows)
    log.info(f"[align] wrote {len(sets)} pairs to {out_perms} (sha256 {digest[:12]})")


def load_alignment_block(point: Point, method: str, perm_path: str, rows_path: str) -> dict:
    """{(seed_a, seed_b): permutations} of rule ``align`` for one pair block; the rows must describe this
    point and method, and the file must match the SHA-256 recorded in them."""
    from lmcflow.alignment import load_permutation_sets

    rows = read_table(rows_path, "alignment")
    got = set(zip(rows["study"], rows["point"], rows["method"]))
    if got != {(point.study, point.point, method)}:
        raise ValueError(f"{rows_path}: alignment rows are for {sorted(got)}, expected "
                         f"{(point.study, point.point, method)}; rebuild them with rule align")
    digests = set(rows["permutation_sha256"])
    if len(digests) != 1:
        raise ValueError(f"{rows_path}: the rows record {len(digests)} different permutation-file hashes; "
                         f"rebuild them with rule align")
    sets, _ = load_permutation_sets(perm_path, expected_sha256=digests.pop())
    log.info(f"[align] {method} permutations of {len(sets)} pairs from {perm_path} (hash verified)")
    return sets


def aligned_pair(model_a: torch.nn.Module, model_b: torch.nn.Module, perms: dict | None
                 ) -> tuple[torch.nn.Module, torch.nn.Module, bool]:
    """Copies of (model A, model B permuted onto A by ``perms``; None = identity) and whether they are in dense
    form: models with symmetry-breaking layers are returned in dense form (``alignment.to_dense_form``)."""
    from lmcflow.alignment import apply_permutation, permutation_spec, to_dense_form

    model_a, model_b = copy.deepcopy(model_a), copy.deepcopy(model_b)
    dense = to_dense_form(model_a)
    to_dense_form(model_b)
    if perms is not None:
        model_b.load_state_dict(apply_permutation(permutation_spec(model_b), model_b.state_dict(), perms))
    return model_a, model_b, dense


def run_mechanism_block(point: Point, method: str, pairs: list, models: dict, alignment: list | None,
                        data_path: str, out: str, device: str = "auto") -> None:
    """LEWC/LLFC, weak additivity, reciprocal orthogonality, low rank and neuron activity of every (aligned) seed
    pair of a pair block, per hidden layer on the λ grid (``lmcflow.mechanism.layer_metrics``), with LEWC of A
    and a random perturbation of A as far away as B (seeded by the pair).

    λ: ``analysis.mechanism.lambdas`` (paper convention, weight on θ_A) or the merge λ grid.
    Inputs: the first ``analysis.mechanism.samples`` test examples; BatchNorm statistics of every
    θ_λ are re-estimated on training data (``merge.bn_reset_size``) when the model has BatchNorm.
    ``alignment``: [permutation file, alignment rows] of rule align (None for identity).
    """
    from lmcflow.config import mechanism_lambdas, mechanism_params
    from lmcflow.mechanism import layer_metrics
    from lmcflow.models import has_batchnorm

    dev = resolve_device(device)
    mp = mechanism_params(point)
    data = load_dataset(data_path).to(dev)
    loaded = load_models(models, dev)
    perms = load_alignment_block(point, method, *alignment) if method != "identity" else {}
    x = data.x["test"][: int(mp["samples"])] if mp["samples"] else data.x["test"]
    bn = point.merge["bn_reset_size"]
    lambdas = mechanism_lambdas(point)  # layer_metrics holds one model per λ in memory
    out_rows = []
    for seed_a, seed_b in pairs:
        t0 = time.perf_counter()
        model_a, model_b, dense = aligned_pair(loaded[seed_a], loaded[seed_b], perms.get((seed_a, seed_b)))
        x_bn = (data.x["train"][:bn] if bn else data.x["train"]) if has_batchnorm(model_a) else None
        rows = layer_metrics(model_a, model_b, x, lambdas, batch_size=int(mp["batch_size"]), x_bn=x_bn,
                             energy=float(mp["energy"]), active_threshold=float(mp["active_threshold"]),
                             perturbation_seed=f"{seed_a}-{seed_b}")
        base = {**point_columns(point), "seed_a": seed_a, "seed_b": seed_b, "method": method,
                "energy": float(mp["energy"]), "n_samples": len(x), "dense_form": dense}
        for r in rows:
            r = dict(r)
            r["weight_key"] = r.pop("weight", "")
            out_rows.append({**base, **r})
            if abs(r["lam_paper"] - 0.5) < 1e-9:
                log.info(f"[mechanism] pair ({seed_a},{seed_b}) layer {r['layer']} λ=½: lewc={r['lewc_cos']:.4f} "
                         f"(perturbed A: {r['lewc_cos_perturbed']:.4f}) llfc={r['llfc_cos']:.4f} "
                         f"weak_add={r['weak_additivity']:.4f} cross_ratio=({r['cross_ratio_a']:.3f},"
                         f"{r['cross_ratio_b']:.3f}) cross_transform_cos={r['cross_transform_cos']:.4f} "
                         f"erank_rel=({r['erank_rel_a']:.3f},{r['erank_rel_b']:.3f}) "
                         f"jaccard={r['active_jaccard']:.3f} (independent {r['active_jaccard_independent']:.3f})")
        log.info(f"[mechanism] {point.study}/{point.point} pair ({seed_a},{seed_b}) method={method} done in "
                 f"{time.perf_counter() - t0:.1f}s")
    write_table(out, "layer_metrics", out_rows)
