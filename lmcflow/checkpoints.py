"""Models and data by path, for the compute jobs: model init from a seed, checkpoints verified against the hash
recorded at training, datasets loaded once per job, the name of the device a job ran on."""
from __future__ import annotations

import platform
from pathlib import Path

import torch

from lmcflow.config import Point
from lmcflow.data import load_dataset
from lmcflow.io import load_tensors
from lmcflow.models import ModelSpec, build_model
from lmcflow.seeding import derive_seed
from lmcflow.state import load_into
from lmcflow.tables import read_table


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


def load_datasets(data_paths: dict, points: list[Point], dev) -> dict:
    """{dataset name: Dataset on ``dev``} for the datasets of ``points``, each loaded once."""
    names = sorted({p.dataset for p in points})
    missing = [n for n in names if n not in data_paths]
    if missing:
        raise ValueError(f"no prepared data file given for dataset(s) {missing}")
    return {n: load_dataset(data_paths[n]).to(dev) for n in names}


def device_name(dev: torch.device) -> str:
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or platform.machine()
    return f"{dev.type}:{name}"
