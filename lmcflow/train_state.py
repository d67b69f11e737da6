"""The resumable training state file: model, optimizer, random-number state, epoch, history and the digest
of the configuration that wrote it. Single-model training (``lmcflow.training``) and bundled training
(``lmcflow.bundle_training``, ``lmcflow.stacked_model``) write and read one format, so a state written by
one resumes in the other.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from lmcflow.io import CorruptFileError, load_tensors, save_tensors
from lmcflow.state import load_into

log = logging.getLogger(__name__)


def optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict, dict]:
    sd = opt.state_dict()
    tensors, scalars = {}, {"param_groups": sd["param_groups"], "state": {}}
    for idx, st in sd["state"].items():
        for key, val in st.items():
            if isinstance(val, torch.Tensor):
                tensors[f"opt/{idx}/{key}"] = val
            else:
                scalars["state"].setdefault(str(idx), {})[key] = val
    return tensors, scalars


def restore_optimizer(opt, tensors: dict, scalars: dict) -> None:
    state: dict = {}
    for name, val in tensors.items():
        if name.startswith("opt/"):
            _, idx, key = name.split("/", 2)
            state.setdefault(int(idx), {})[key] = val
    for idx, st in scalars["state"].items():
        state.setdefault(int(idx), {}).update(st)
    opt.load_state_dict({"state": state, "param_groups": scalars["param_groups"]})


def save_state(path, model, opt, g_data: torch.Generator, epoch: int, history: list,
               digest: str | None = None) -> None:
    """Everything needed to continue training bit-identically after ``epoch`` epochs.

    ``digest`` identifies the configuration that produced the state (``lmcflow.jobs.train.train_digest``);
    a later run with another configuration discards the state instead of resuming it.
    """
    opt_t, opt_s = optimizer_tensors(opt)
    write_state(path, model.state_dict(), opt_t, opt_s, g_data, epoch, history, digest)


def write_state(path, model_state: dict, opt_tensors: dict, opt_scalars: dict, g_data: torch.Generator,
                epoch: int, history: list, digest: str | None) -> None:
    """The state file format shared by single-model and bundled training (a state written by one
    resumes in the other): ``model/<name>``, ``opt/<param index>/<key>``, ``rng/data``, ``rng/torch``
    tensors; epoch, optimizer scalars, history and config digest as metadata."""
    tensors = {f"model/{k}": v for k, v in model_state.items()}
    tensors.update(opt_tensors)
    tensors["rng/data"] = g_data.get_state()
    tensors["rng/torch"] = torch.get_rng_state()
    save_tensors(path, tensors, {"epoch": epoch, "optimizer": opt_scalars, "history": history, "digest": digest})


def read_state(path) -> tuple[dict, dict]:
    """(tensors, metadata) of a state file written by ``write_state``."""
    return load_tensors(path, rebuild_hint="a fresh training run (delete the state file)")


def load_state(path, model, opt, g_data: torch.Generator) -> tuple[int, list]:
    tensors, meta = read_state(path)
    load_into(model, {k[6:]: v for k, v in tensors.items() if k.startswith("model/")})
    restore_optimizer(opt, tensors, meta["optimizer"])
    g_data.set_state(tensors["rng/data"])
    torch.set_rng_state(tensors["rng/torch"])
    return int(meta["epoch"]), list(meta["history"])


def usable_state(path, digest: str | None) -> bool:
    """True if a resumable state exists at ``path`` and was written for configuration ``digest``.

    A state of another configuration (or without a digest, when one is expected) is deleted with a
    warning: resuming it would continue stale weights under a changed config. ``digest=None``
    accepts any state.
    """
    if path is None or not Path(path).exists():
        return False
    if digest is None:
        return True
    try:
        with safe_open(str(path), framework="pt") as fh:
            stored = json.loads((fh.metadata() or {}).get("lmcflow", "{}")).get("digest")
    except (SafetensorError, OSError, ValueError) as err:
        raise CorruptFileError(f"{path}: cannot be read as a training state ({err}). Delete it; the model "
                               f"then trains from scratch.") from err
    if stored == digest:
        return True
    log.warning(f"[train] {path}: state of another configuration (digest {str(stored)[:12]}, expected "
                f"{digest[:12]}); deleted, training from scratch")
    os.unlink(path)
    return False
