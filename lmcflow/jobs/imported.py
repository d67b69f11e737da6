"""Rule ``import_models``: the checkpoints of an imported study's seed block, each checked against the SHA-256 the
plan recorded, loaded weights-only into the model its factory builds, and written as a trained model is (an
lmcflow checkpoint and a one-row ``runs`` table), so alignment, merging, REPAIR and barriers read it as any other."""
from __future__ import annotations

import logging
import time

import torch

from lmcflow.checkpoints import as_point, model_spec_for, write_model
from lmcflow.data import load_dataset
from lmcflow.evaluation import resolve_device
from lmcflow.imported import fit_checkpoint, read_state_dict, verified
from lmcflow.models import build_model

log = logging.getLogger(__name__)


def run_import(point: dict, models: dict, sources: dict, data_path: str, device: str = "cpu") -> list[dict]:
    """``models``: {seed: [checkpoint, run row]} to write; ``sources``: {seed: [file, SHA-256]} to read."""
    t0 = time.perf_counter()
    dev = resolve_device(device)
    p = as_point(point)
    data = load_dataset(data_path).to(dev)
    spec = model_spec_for(p, data)
    rows = []
    for seed, (ckpt, row) in sorted(models.items(), key=lambda kv: int(kv[0])):
        path, sha = sources[str(seed)] if str(seed) in sources else sources[int(seed)]
        state = read_state_dict(verified(path, sha, f"the checkpoint of {p.study} seed {seed}"))
        with torch.random.fork_rng(devices=[]):  # the init is overwritten: nothing else's randomness moves
            model = fit_checkpoint(build_model(spec), state, path).to(dev)
        info = {"history": [], "precision": "fp32", "train_seconds": 0.0}
        rows.append(write_model(p, int(seed), spec, model, data, info, ckpt, row, dev,
                                   f"{p.study}/{p.point}/imported", t0, source={"file": str(path), "sha256": sha}))
        log.info(f"[import] {p.study} seed {seed}: {path} (sha256 {sha[:12]})")
    return rows
