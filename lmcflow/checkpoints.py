"""Models and data by path, for the compute jobs: model init from a seed, checkpoints verified against the hash
recorded at training, datasets loaded once per job, the name of the device a job ran on."""
from __future__ import annotations

import logging
import os
import platform
import time
from pathlib import Path

import torch

from lmcflow import kernels
from lmcflow.config import Point
from lmcflow.data import load_dataset
from lmcflow.evaluation import evaluate
from lmcflow.io import load_tensors, save_tensors
from lmcflow.models import ModelSpec, build_model, count_parameters
from lmcflow.seeding import derive_seed
from lmcflow.state import checkpoint_state, load_into
from lmcflow.symmetry import trainable_weight_norm
from lmcflow.tables import point_columns, read_table, write_table
from lmcflow.training import late_loss_drop

log = logging.getLogger(__name__)


def model_spec_for(point: Point, data) -> ModelSpec:
    m = {k: v for k, v in point.model.items() if k in ModelSpec.__dataclass_fields__}
    return ModelSpec(in_shape=data.in_shape, num_classes=data.num_classes, **m)


def init_model(spec: ModelSpec, seed: int) -> torch.nn.Module:
    """Model init from an explicit seed (fork the global RNG so nothing else is disturbed)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed("init", seed))
        return build_model(spec)


def load_checkpoint(ckpt_path: str, run_row_path: str, device) -> tuple[torch.nn.Module, dict]:
    """Rebuild a trained model, verifying the checkpoint against the hash recorded at training."""
    row = read_table(run_row_path, "runs").iloc[0]
    sd, meta = load_tensors(ckpt_path, expected_sha256=row["checkpoint_sha256"],
                            rebuild_hint=f"rule train (delete it, then rerun snakemake; it retrains "
                                         f"{meta_hint(ckpt_path)})")
    model = build_model(ModelSpec.from_dict(meta["model_spec"]))
    load_into(model, sd)
    return model.to(device), {k: v.to(device) for k, v in sd.items()}


def meta_hint(path) -> str:
    return f"seed file {Path(path).name}"


def load_models(models: dict, device) -> dict[int, torch.nn.Module]:
    """{seed: model} from {seed: [checkpoint, run row]}, each checkpoint verified against its recorded hash."""
    return {int(s): load_checkpoint(ckpt, row, device)[0] for s, (ckpt, row) in models.items()}


def as_point(p) -> Point:
    return p if isinstance(p, Point) else Point.from_dict(p)


def load_datasets(data: dict, points: list[Point], dev) -> dict:
    """{dataset name: Dataset on ``dev``} for the datasets of ``points``, each loaded once."""
    names = sorted({p.dataset for p in points})
    missing = [n for n in names if n not in data]
    if missing:
        raise ValueError(f"no prepared data file given for dataset(s) {missing}")
    return {n: load_dataset(data[n]).to(dev) for n in names}


def device_name(dev: torch.device) -> str:
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or platform.machine()
    return f"{dev.type}:{name}"


def write_model(point: Point, seed: int, spec: ModelSpec, model, data, info: dict, out_ckpt: str, out_row: str,
                   dev, bundle_id: str, t0: float, source: dict | None = None) -> dict:
    """Checkpoint (safetensors: weights + spec, point, seed, history, and for an imported model its ``source``
    file and SHA-256; nothing host- or time-dependent), its SHA-256, and the model's one-row ``runs`` table
    (timings and host live only there)."""
    metrics = {s: evaluate(model, data.x[s], data.y[s], data.task) for s in ("train", "val", "test")}
    meta = {"model_spec": spec.to_dict(), "study": point.study, "point": point.point, "seed": seed,
            "history": info["history"], **({"source": source} if source else {})}
    digest = save_tensors(out_ckpt, checkpoint_state(model), meta)
    row = {**point_columns(point), "seed": seed, "n_params": count_parameters(model),
           **{f"{s}_{k}": v for s, m in metrics.items() for k, v in m.items()},
           "train_loss_late_drop": late_loss_drop(info["history"]),
           "wall_time_s": time.perf_counter() - t0, "train_seconds": info["train_seconds"],
           "device": device_name(dev),
           "precision": info["precision"], "checkpoint": str(out_ckpt), "checkpoint_sha256": digest,
           "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""), "bundle_id": bundle_id,
           "train_threads": torch.get_num_threads(), "weight_norm": trainable_weight_norm(model), **kernels.check()}
    write_table(out_row, "runs", [row])
    log.info(f"[train] {point.study}/{point.point} seed={seed} done: test acc={metrics['test']['acc']:.4f} "
        f"loss={metrics['test']['loss']:.4f} sha256={digest[:12]}")
    return row
