"""Rule ``train``: models of one seed block trained (alone or stacked in bundles), each written as a checkpoint and
a one-row ``runs`` table."""
from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

import torch

from lmcflow.bundle_training import Member, train_bundle
from lmcflow.checkpoints import as_point, init_model, load_datasets, model_spec_for, write_model
from lmcflow.config import Point, learning_settings
from lmcflow.config.partners import collapse, training_seed
from lmcflow.data import load_dataset
from lmcflow.evaluation import resolve_device, resolve_precision
from lmcflow.models import count_parameters
from lmcflow.payloads import TrainModels
from lmcflow.training import DivergenceError, train

log = logging.getLogger(__name__)


def train_digest(point: Point, seed: int, data_meta: dict, precision: str) -> str:
    """SHA-256 of everything that decides a trained model: dataset (name and prepared-file metadata,
    which holds its sizes and normalisation statistics), model block, train settings (without
    execution-only keys such as resources, checkpoint_every and bundle), seed and the precision
    actually used. Stored in resumable states: a state of another digest is never resumed."""
    payload = {"dataset": point.dataset, "data": data_meta, "model": point.model,
               "train": learning_settings(point.train), "seed": int(seed), "precision": precision,
               **({"partner": point.partner} if point.partner != "real" else {})}
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
    model = init_model(spec, training_seed(point, seed)).to(dev)
    log.info(f"[train] {point.study}/{point.point} seed={seed} arch={spec.arch} width={spec.width} "
        f"params={count_parameters(model)} device={dev}")
    state_path = state_path_for(out_ckpt, point, seed)
    digest = train_digest(point, seed, data.meta, resolve_precision(point.train.get("precision", "auto"), dev))
    info = train(model, data, point.train, training_seed(point, seed), dev, state_path=state_path,
                 state_digest=digest, name=f"{point.study}/{point.point} seed={seed}")
    collapse(model, point)
    return write_model(point, seed, spec, model, data, info, out_ckpt, out_row, dev, run_label(point, seed), t0)


def run_train_bundle(members: list[dict], data: dict, device: str = "auto", state_dir: str | None = None,
                     bundle_id: str | None = None) -> list[dict]:
    """Train several models as one bundle (``lmcflow.bundle_training.train_bundle``) and write, for each, exactly
    what ``run_train`` writes for it: its checkpoint, SHA-256 and one-row ``runs`` table.

    ``members``: one dict per model, ``{"point": Point (or its dict), "seed": int, "ckpt": checkpoint
    path, "row": run-row path}``; models and train settings must agree (``lmcflow.bundle_training.check_bundle``).
    ``data``: dataset name -> prepared data file (each loaded once). ``state_dir``: where the
    resumable states go (None: beside each checkpoint, as ``run_train``). ``bundle_id``: the
    ``bundle_id`` column (default ``default_bundle_id``). Returns the run rows of the written models.
    A bundle of one trains exactly as ``run_train``. If members diverge, the healthy ones are written
    (and their final states kept) before ``DivergenceError`` names the diverged points and seeds.
    """
    return run_train_group([members], data, device, state_dir, [bundle_id])


def run_train_group(bundles: list[list[dict]], data: dict, device: str = "auto", state_dir: str | None = None,
                    bundle_ids: list | None = None, stack_alone: bool = False) -> list[dict]:
    """Rule ``train``: the bundles of one seed block of a grid group (``lmcflow.grouping.grid_groups``), one after
    the other in this process, each as ``run_train_bundle`` trains it (members as there; every dataset is loaded
    once). ``stack_alone``: a bundle of one model trains stacked too (a bundle a run added beside kept ones,
    ``lmcflow.plan.kept``: its bits are then those it would have in a bundle with them). A bundle whose members
    diverge does not stop the others: every healthy model is written, then one
    ``DivergenceError`` names every diverged point and seed."""
    t0 = time.perf_counter()
    if not bundles or not all(bundles):
        raise ValueError("run_train_group: every bundle needs at least one member")
    dev = resolve_device(device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    stacks = [[(as_point(m["point"]), int(m["seed"]), str(m["ckpt"]), str(m["row"])) for m in members]
              for members in bundles]
    datasets = load_datasets(data, [p for entries in stacks for p, *_ in entries], dev)
    rows, failures = [], []
    for entries, bid in zip(stacks, bundle_ids or [None] * len(stacks), strict=True):
        try:
            rows += _train_one_bundle(entries, datasets, dev, state_dir, bid, t0, stack_alone)
        except DivergenceError as err:
            failures.append(err)
    if len(failures) == 1:
        raise failures[0]
    if failures:
        raise DivergenceError(" | ".join(str(err) for err in failures),
                              diverged=[d for err in failures for d in err.diverged],
                              results=[r for err in failures for r in err.results])
    return rows


def run_train_job(points: list[dict], bundles: list[list[str]], models: TrainModels, data: dict,
                  device: str = "auto", state_dir: str | None = None, stack_alone: bool = False) -> list[dict]:
    """Rule ``train``: its params as the rule names them (``lmcflow.payloads.TrainParams``): the grid group's
    ``points`` (job dicts), the point ids of each of its ``bundles``, the ``models`` to write per point and seed,
    and ``data`` {dataset: prepared file}; trained as ``run_train_group`` trains them."""
    by_id = {point["point"]: point for point in points}
    members = [[{"point": by_id[pid], "seed": seed, "ckpt": ckpt, "row": row}
                for pid in ids for seed, (ckpt, row) in models[pid].items()] for ids in bundles]
    return run_train_group(members, data, device=device, state_dir=state_dir, stack_alone=stack_alone)


def _train_one_bundle(entries: list[tuple], datasets: dict, dev, state_dir, bundle_id, t0: float,
                      stack_alone: bool = False) -> list[dict]:
    bid = bundle_id or default_bundle_id([(p, s) for p, s, *_ in entries])
    bundle, specs = [], []
    for point, seed, ckpt, _ in entries:
        data = datasets[point.dataset]
        if point.partner == "shuffled_labels":
            data = data.with_shuffled_labels(seed)
        spec = model_spec_for(point, data)
        specs.append(spec)
        precision = resolve_precision(point.train.get("precision", "auto"), dev)
        tseed = training_seed(point, seed)  # a collapsed partner is B: trained from B's seed, then scaled
        bundle.append(Member(model=init_model(spec, tseed).to(dev), data=data, seed=tseed, cfg=point.train,
                             name=f"{point.study}/{point.point} seed={seed}",
                             state_path=state_path_for(ckpt, point, seed, state_dir),
                             digest=train_digest(point, seed, data.meta, precision)))
    log.info(f"[train] bundle {bid}: {len(bundle)} models arch={specs[0].arch} width={specs[0].width} "
             f"params={count_parameters(bundle[0].model)} each, device={dev}")
    failure = None
    try:
        results = train_bundle(bundle, dev, stack_alone=stack_alone)
    except DivergenceError as err:
        if not err.results:
            raise
        failure, results = err, err.results
    rows = []
    for (point, seed, ckpt, row_path), spec, member, res in zip(entries, specs, bundle, results, strict=True):
        if res["diverged"] is None:
            collapse(member.model, point)
            rows.append(write_model(point, seed, spec, member.model, member.data, res, ckpt, row_path, dev,
                                       bid, t0))
    if failure is not None:
        raise failure
    return rows


