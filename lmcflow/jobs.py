"""One function per workflow job. Snakemake ``script:`` files only unpack
``snakemake.input/output/params`` and call these; everything here is plain
Python and testable without Snakemake.
"""
from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import torch

from lmcflow import claims as claims_mod
from lmcflow import figures
from lmcflow.config import Point
from lmcflow.data import load_dataset, prepare_dataset
from lmcflow.io import load_tensors, save_tensors, write_json
from lmcflow.merging import evaluate_path, lambda_grid
from lmcflow.models import ModelSpec, build_model, count_parameters
from lmcflow.seeding import derive_seed
from lmcflow.tables import (barrier_rows, concat_tables, make_frame, point_columns, read_table,
                            write_table)
from lmcflow.training import evaluate, resolve_device, train


# --------------------------------------------------------------------------- logging
@contextlib.contextmanager
def job_log(path: str | None):
    """Send stdout/stderr (and any traceback) of a job to its Snakemake log file."""
    if not path:
        yield print
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", buffering=1) as fh:
        def log(msg: str) -> None:
            fh.write(f"{time.strftime('%H:%M:%S')} {msg}\n")

        old = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = fh
        try:
            yield log
        except BaseException:
            fh.write(traceback.format_exc())
            raise
        finally:
            sys.stdout, sys.stderr = old


def set_threads(n: int) -> None:
    torch.set_num_threads(max(1, int(n)))


# --------------------------------------------------------------------------- data
def run_prepare_data(dataset: str, data_cfg: dict, out: str, cache_root: str, log=print) -> None:
    prepare_dataset(dataset, data_cfg, out, cache_root, log=log)


# --------------------------------------------------------------------------- training
def model_spec_for(point: Point, data) -> ModelSpec:
    m = {k: v for k, v in point.model.items() if k in ModelSpec.__dataclass_fields__}
    return ModelSpec(in_shape=data.in_shape, num_classes=data.num_classes, **m)


def init_model(spec: ModelSpec, seed: int) -> torch.nn.Module:
    """Model init from an explicit seed (fork the global RNG so nothing else is disturbed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed("init", seed))
        return build_model(spec)


def run_train(point: Point, seed: int, data_path: str, out_ckpt: str, out_row: str, device: str = "auto",
              log=print) -> dict:
    t0 = time.perf_counter()
    dev = resolve_device(device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    data = load_dataset(data_path).to(dev)
    spec = model_spec_for(point, data)
    model = init_model(spec, seed).to(dev)
    log(f"[train] {point.study}/{point.point} seed={seed} arch={spec.arch} width={spec.width} "
        f"params={count_parameters(model)} device={dev}")
    state_path = Path(out_ckpt).with_name(Path(out_ckpt).stem + ".state.safetensors")
    info = train(model, data, point.train, seed, dev, log=log, state_path=state_path)
    metrics = {s: evaluate(model, data.x[s], data.y[s], data.task) for s in ("train", "val", "test")}
    meta = {"model_spec": spec.to_dict(), "study": point.study, "point": point.point, "seed": seed,
            "history": info["history"]}
    digest = save_tensors(out_ckpt, model.state_dict(), meta)
    row = {**point_columns(point), "seed": seed, "n_params": count_parameters(model),
           **{f"{s}_{k}": v for s, m in metrics.items() for k, v in m.items()},
           "wall_time_s": time.perf_counter() - t0, "train_seconds": info["train_seconds"],
           "device": f"{dev.type}:{torch.cuda.get_device_name(dev) if dev.type == 'cuda' else platform.processor() or platform.machine()}",
           "precision": info["precision"], "checkpoint": str(out_ckpt), "checkpoint_sha256": digest,
           "slurm_job_id": os.environ.get("SLURM_JOB_ID", "")}
    write_table(out_row, "runs", [row])
    log(f"[train] done: test acc={metrics['test']['acc']:.4f} loss={metrics['test']['loss']:.4f} "
        f"sha256={digest[:12]}")
    return row


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
def run_merge(point: Point, method: str, seed_a: int, seed_b: int, ckpts: list, run_rows: list,
              data_path: str, out: str, device: str = "auto", log=print) -> None:
    dev = resolve_device(device)
    data = load_dataset(data_path).to(dev)
    model, sd_a = load_checkpoint(ckpts[0], run_rows[0], dev)
    _, sd_b = load_checkpoint(ckpts[1], run_rows[1], dev)
    if method != "identity":
        raise ValueError(f"merge method {method!r} needs the alignment stage; available here: identity")
    lambdas = lambda_grid(int(point.merge.get("lambdas", 11)))
    log(f"[merge] {point.study}/{point.point} pair ({seed_a},{seed_b}) method={method} λ grid={lambdas}")
    rows = evaluate_path(model, sd_a, sd_b, data, lambdas,
                         train_eval_size=point.merge.get("train_eval_size"),
                         bn_reset_size=point.merge.get("bn_reset_size"), log=log)
    base = {**point_columns(point), "seed_a": seed_a, "seed_b": seed_b, "method": method}
    write_table(out, "interpolation", [{**base, **r} for r in rows])


# --------------------------------------------------------------------------- aggregation
def run_concat(paths: list, kind: str, out: str) -> None:
    write_table(out, kind, concat_tables(paths, kind))


def run_barriers(interp_path: str, out: str) -> None:
    write_table(out, "barriers", barrier_rows(read_table(interp_path, "interpolation")))


def study_scale(points: list[Point]) -> dict:
    """What a claim was measured at: enough to tell a CPU run from paper scale."""
    return {
        "dataset": sorted({p.dataset for p in points}), "arch": sorted({p.model["arch"] for p in points}),
        "widths": sorted({float(p.model["width"]) for p in points}),
        "weight_decays": sorted({float(p.train["weight_decay"]) for p in points}),
        "epochs": sorted({int(p.train["epochs"]) for p in points}),
        "seeds": sorted({s for p in points for s in p.seeds}),
    }


def run_claim(cid: str, ccfg: dict, table_paths: dict, points: list[Point], out_json: str, log=print) -> dict:
    tables = {kind: read_table(path, kind) for kind, path in table_paths.items()}
    result = claims_mod.evaluate_claim(cid, ccfg, tables, study_scale(points))
    write_json(out_json, result)
    log(f"[claim] {cid}: {result['verdict']} ({result['statistic_name']} = {result['statistic']:.4g} "
        f"[{result['ci_low']:.4g}, {result['ci_high']:.4g}], n_pairs={result['n_pairs']})")
    return result


def run_claims_table(json_paths: list, out: str) -> None:
    import json
    rows = [claims_mod.claim_row(json.loads(Path(p).read_text())) for p in json_paths]
    write_table(out, "claims", make_frame("claims", rows))


def run_width_figures(barriers_path: str, interp_path: str, outputs: dict, definition: str) -> None:
    b = read_table(barriers_path, "barriers")
    i = read_table(interp_path, "interpolation")
    figures.save_figure(figures.barrier_vs_width(b, definition), outputs["barrier_png"], outputs["barrier_pdf"])
    figures.save_figure(figures.error_along_lambda(i), outputs["lambda_png"], outputs["lambda_pdf"])
    figures.save_figure(figures.loss_barrier_raw_vs_calibrated(b, definition), outputs["calib_png"],
                        outputs["calib_pdf"])
