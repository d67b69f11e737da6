"""Bundled training: K models of the same shape trained at once as one stacked model.

Details: docs/internals.md, "`lmcflow.bundle_training`".
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from lmcflow.config import EXECUTION_KEYS, learning_settings
from lmcflow.evaluation import resolve_precision
from lmcflow.random_ops import check_random_ops, step_keys
from lmcflow.seeding import generator
from lmcflow.stacked_model import Stack, bundle_forward, member_losses
from lmcflow.state import load_into
from lmcflow.train_state import optimizer_tensors, read_state, usable_state, write_state
from lmcflow.training import DivergenceError, apply_crop_flip, crop_flip_draws, lr_at, optimizer_for, train

log = logging.getLogger(__name__)

__all__ = ["EXECUTION_KEYS", "Member", "Stack", "check_bundle", "learning_settings", "member_losses", "train_bundle"]


@dataclass
class Member:
    """One model of a bundle.

    model       built by ``lmcflow.checkpoints.init_model(spec, seed)``; trained in place
    data        its ``lmcflow.data.Dataset`` on the training device (members may share one object)
    seed        its seed (data order and augmentation derive from it, as in ``training.train``)
    cfg         its point's ``train`` block
    name        label for logs and errors, e.g. ``"sigma_f/sigma_f-3 seed=2"``
    state_path  resumable state file (None: no resumption)
    digest      configuration digest stored in the state (``lmcflow.jobs.train.train_digest``)
    """

    model: nn.Module
    data: object
    seed: int
    cfg: dict
    name: str = ""
    state_path: str | os.PathLike | None = None
    digest: str | None = None


def check_bundle(members: list[Member]) -> None:
    """Refuse a bundle whose members cannot be stacked, naming the offending members."""
    if not members:
        raise ValueError("a bundle needs at least one member")
    ref = members[0]
    ref_cfg = learning_settings(ref.cfg)
    ref_struct = _structure(ref.model)
    ref_data = _train_shape(ref.data)
    for m in members[1:]:
        cfg = learning_settings(m.cfg)
        if cfg != ref_cfg:
            keys = sorted(k for k in set(cfg) | set(ref_cfg) if cfg.get(k) != ref_cfg.get(k))
            raise ValueError(f"bundle members {ref.name!r} and {m.name!r} have different train settings "
                             f"({', '.join(f'train.{k}: {ref_cfg.get(k)!r} vs {cfg.get(k)!r}' for k in keys)}); "
                             f"only models trained the same way can share a bundle")
        struct = _structure(m.model)
        if struct != ref_struct:
            diff = next((a, b) for a, b in zip(ref_struct + [None], struct + [None], strict=False) if a != b)
            raise ValueError(f"bundle members {ref.name!r} and {m.name!r} have models of different structure "
                             f"(first difference: {diff[0]} vs {diff[1]}); only models of the same "
                             f"architecture, width and symmetry kind can share a bundle")
        if _train_shape(m.data) != ref_data:
            raise ValueError(f"bundle members {ref.name!r} and {m.name!r} have training data of different shape "
                             f"({ref_data} vs {_train_shape(m.data)}); only datasets of equal size and shape "
                             f"can share a bundle")
    devices = {t.device for m in members for t in (*m.model.parameters(), m.data.x["train"])}
    if len(devices) > 1:
        raise ValueError(f"bundle members are on different devices {sorted(map(str, devices))}; move every model "
                         f"and dataset to the training device first")


def _structure(model: nn.Module) -> list:
    mods = [(n, type(m).__name__) for n, m in model.named_modules()]
    tensors = [(n, tuple(t.shape), str(t.dtype), isinstance(t, nn.Parameter) and t.requires_grad)
               for n, t in (*model.named_parameters(), *model.named_buffers())]
    return mods + tensors


def _train_shape(data) -> tuple:
    x, y = data.x["train"], data.y["train"]
    return (tuple(x.shape), str(x.dtype), tuple(y.shape), str(y.dtype), data.task)


def train_bundle(members: list[Member], device: torch.device, on_batch=None, stack_alone: bool = False) -> list[dict]:
    """Train every member's model in place; one result dict per member, in order.

    Results hold ``history`` (per epoch: epoch, train_loss, train_acc, lr, as ``training.train``),
    ``precision``, ``train_seconds`` (the bundle's loop time in this process, shared by its members)
    and ``restored`` (True if the member's final state came from disk and it trained no step here).
    Members with a state file resume from it when its digest matches (``train_state.usable_state``);
    members at different epochs train as separate stacked sub-bundles. States are saved every
    ``checkpoint_every`` epochs and deleted when every member finished.

    ``on_batch(epoch, step, names, xb, yb)``, if given, sees each step's inputs of the active
    members (xb: (K, b, …) after augmentation) before the forward pass.

    A bundle of one member runs ``training.train`` (bit-identical to single-model training), or with
    ``stack_alone`` the stacked loop (bit-identical to its run in a larger stacked bundle on one CPU thread).
    If members diverge, the others finish, their final states are saved and ``DivergenceError``
    (with ``.diverged`` and ``.results``) is raised.
    """
    for i, m in enumerate(members):
        m.name = m.name or f"member {i} (seed {m.seed})"
    check_bundle(members)
    cfg = members[0].cfg
    if len(members) == 1 and not stack_alone:
        m = members[0]
        restored = usable_state(m.state_path, m.digest) and _state_epoch(m.state_path) >= int(cfg["epochs"])
        info = train(m.model, m.data, m.cfg, m.seed, device, state_path=m.state_path, state_digest=m.digest,
                     name=m.name)
        return [{**info, "restored": restored, "diverged": None}]
    epochs = int(cfg["epochs"])
    gens = [generator("data-order", m.seed) for m in members]
    histories: list[list] = [[] for _ in members]
    saved: list = [None] * len(members)
    start = [0] * len(members)
    for i, m in enumerate(members):
        if usable_state(m.state_path, m.digest):
            tensors, meta = read_state(m.state_path)
            load_into(m.model, {k[6:]: v for k, v in tensors.items() if k.startswith("model/")})
            gens[i].set_state(tensors["rng/data"])
            start[i], histories[i] = int(meta["epoch"]), list(meta["history"])
            saved[i] = ({k: v for k, v in tensors.items() if k.startswith("opt/")}, meta["optimizer"])
            del tensors
            log.info(f"[bundle] {m.name}: resumed from {m.state_path} after epoch {start[i]}")
    precision = resolve_precision(cfg.get("precision", "auto"), device)
    results: list[dict] = [{"history": histories[i], "precision": precision, "train_seconds": 0.0,
                            "restored": start[i] >= epochs, "diverged": None} for i in range(len(members))]
    for epoch0 in sorted(set(start)):
        group = [i for i in range(len(members)) if start[i] == epoch0]
        if epoch0 >= epochs:
            continue
        # Even a group of one trains stacked: a member's bits then do not depend on which others share its
        # group (measured on one CPU thread), so a bundle resumed with members at different epochs (killed
        # between two state writes) ends bit-identical to an uninterrupted run.
        _train_group([members[i] for i in group], [gens[i] for i in group], [histories[i] for i in group],
                     [saved[i] for i in group] if epoch0 > 0 else None, epoch0, device, precision,
                     [results[i] for i in group], on_batch)
    diverged = [r["diverged"] for r in results if r["diverged"]]
    if diverged:
        # Keep the healthy members' final weights on disk: Snakemake deletes a failed job's outputs, and a
        # rerun (after the diverged points' config is fixed) restores these without training. A finished
        # state needs no optimizer state, and its data-order generator is never drawn from again.
        for m, r, g in zip(members, results, gens, strict=True):
            if r["diverged"] is None and m.state_path is not None and not r["restored"]:
                _, scalars = optimizer_tensors(optimizer_for(list(m.model.parameters()), cfg))
                write_state(m.state_path, m.model.state_dict(), {}, scalars, g, epochs, r["history"], m.digest)
        lines = "; ".join(f"{d['name']}: loss={d['loss']} at epoch {d['epoch']}/{epochs}, step {d['step']}/"
                          f"{d['steps_per_epoch']} (global step {d['global_step']}), lr={d['lr']:.4g}"
                          for d in diverged)
        healthy = len(members) - len(diverged)
        others = (f" The other {healthy} trained to the end; their final states are kept beside their checkpoints "
                  f"and a rerun restores them without training." if healthy else "")
        raise DivergenceError(
            f"training diverged for {len(diverged)} of {len(members)} bundle members: {lines}. Nothing of those "
            f"was written; lower train.lr or raise train.warmup_epochs for their point(s).{others}",
            diverged=diverged, results=results)
    for m in members:
        if m.state_path is not None and Path(m.state_path).exists():
            os.unlink(m.state_path)
    return results


def _state_epoch(path) -> int:
    with safe_open(str(path), framework="pt") as fh:
        return int(json.loads((fh.metadata() or {}).get("lmcflow", "{}")).get("epoch", 0))


def _train_group(members: list[Member], gens: list, histories: list, saved: list | None, start_epoch: int,
                 device: torch.device, precision: str, results: list, on_batch) -> None:
    """Train members that all start at ``start_epoch`` as one stacked model (see ``train_bundle``)."""
    cfg = members[0].cfg
    data = members[0].data
    task = data.task
    n = len(data.x["train"])
    bs = int(cfg["batch_size"])
    steps_per_epoch = math.ceil(n / bs)
    cfg = dict(cfg, _steps_per_epoch=steps_per_epoch)
    epochs = int(cfg["epochs"])
    total_steps = epochs * steps_per_epoch
    augment = cfg.get("augment", "none")
    every = int(cfg.get("checkpoint_every", 0) or 0)
    stack = Stack([m.model for m in members])
    opt = optimizer_for(list(stack.params.values()), cfg, stacked=True)
    if saved is not None:
        stack.load_opt_states(opt, saved)
    active = list(range(len(members)))  # member positions still training, in stack order
    # Training inputs: one tensor if the members share a dataset, else the distinct ones stacked.
    distinct: list = []  # datasets, by identity
    for m in members:
        if not any(m.data is d for d in distinct):
            distinct.append(m.data)
    data_of = torch.tensor([next(j for j, d in enumerate(distinct) if m.data is d) for m in members], device=device)
    # datasets that differ only in their labels (shuffled-label partners) share one input tensor
    x_distinct = []
    for d in distinct:
        if not any(d.x["train"] is x for x in x_distinct):
            x_distinct.append(d.x["train"])
    x_of = torch.tensor([next(j for j, x in enumerate(x_distinct) if d.x["train"] is x) for d in distinct],
                        device=device)
    xs = [d.x["train"] for d in distinct]
    x_all = xs[0] if len(xs) == 1 else torch.stack(x_distinct) if len(x_distinct) > 1 else x_distinct[0]
    y_all = distinct[0].y["train"] if len(xs) == 1 else torch.stack([d.y["train"] for d in distinct])
    sample_shape = tuple(xs[0].shape[1:])
    names = [m.name for m in members]
    random_ops = check_random_ops(members[0].model, sample_shape, members[0].name)
    step_losses = bundle_forward(stack, task, device, precision, cfg.get("compile", False), random_ops)
    log.info(f"[bundle] training {len(members)} members from epoch {start_epoch}: {', '.join(names)} "
             f"({len(xs)} distinct training set{'s' if len(xs) > 1 else ''}, precision {precision})")
    t0 = time.perf_counter()
    lr = float("nan")
    for epoch in range(start_epoch, epochs):
        stack.train()
        perms = torch.stack([torch.randperm(n, generator=gens[p]) for p in active]).to(device)
        loss_sum = torch.zeros(len(active), device=device)
        correct = torch.zeros(len(active), device=device)
        for i in range(steps_per_epoch):
            step = epoch * steps_per_epoch + i
            lr = lr_at(step, total_steps, cfg)
            for group in opt.param_groups:
                group["lr"] = lr
            idx = perms[:, i * bs:(i + 1) * bs]
            k, b = idx.shape
            if len(xs) == 1:
                flat = idx.reshape(-1)
                xb = x_all.index_select(0, flat).view(k, b, *sample_shape)
                yb = y_all.index_select(0, flat).view(k, b)
            else:
                flat = (data_of[active][:, None] * n + idx).reshape(-1)
                if len(x_distinct) > 1:
                    flat_x = (x_of[data_of[active]][:, None] * n + idx).reshape(-1)
                    xb = x_all.view(-1, *sample_shape).index_select(0, flat_x).view(k, b, *sample_shape)
                else:
                    xb = x_all.index_select(0, idx.reshape(-1)).view(k, b, *sample_shape)
                yb = y_all.view(-1).index_select(0, flat).view(k, b)
            if augment == "crop_flip":
                draws = [crop_flip_draws(b, gens[p]) for p in active]
                flip, dx, dy = (torch.cat([d[j] for d in draws]) for j in range(3))
                xb = apply_crop_flip(xb.view(k * b, *sample_shape), flip, dx, dy).view(k, b, *sample_shape)
            if on_batch is not None:
                on_batch(epoch, i, [names[p] for p in active], xb, yb)
            keys = step_keys([members[p].seed for p in active], step, device) if random_ops else None
            losses, out = step_losses(stack.params, stack.buffers, xb, yb, keys)
            finite = torch.isfinite(losses)
            if not bool(finite.all()):
                bad = [r for r in range(len(active)) if not finite[r]]
                for r in bad:
                    p = active[r]
                    results[p]["diverged"] = {"name": names[p], "seed": members[p].seed, "epoch": epoch + 1,
                                              "step": i + 1, "steps_per_epoch": steps_per_epoch,
                                              "global_step": step, "lr": lr, "loss": losses[r].item()}
                    log.error(f"[bundle] {names[p]} diverged: loss={losses[r].item()} at epoch {epoch + 1}/{epochs}, "
                              f"step {i + 1}/{steps_per_epoch}, lr={lr:.4g}; removed from the bundle, the others "
                              f"continue")
                rows = [r for r in range(len(active)) if finite[r]]
                active = [active[r] for r in rows]
                if not active:
                    break
                saved_opt = [stack.member_opt_state(opt, r) for r in rows]
                stack.keep(rows)
                opt = optimizer_for(list(stack.params.values()), cfg, stacked=True)
                stack.load_opt_states(opt, saved_opt)
                for group in opt.param_groups:
                    group["lr"] = lr
                perms, loss_sum, correct = perms[rows], loss_sum[rows], correct[rows]
                xb, yb = xb[rows], yb[rows]
                keys = keys[rows] if keys is not None else None
                losses, out = step_losses(stack.params, stack.buffers, xb, yb, keys)
            opt.zero_grad(set_to_none=True)
            losses.sum().backward()
            opt.step()
            loss_sum += losses.detach() * b
            if task != "regression":
                correct += (out.argmax(-1) == yb).sum(1)
        if not active:
            break
        losses_epoch = (loss_sum / n).tolist()
        accs = (correct / n).tolist() if task != "regression" else [float("nan")] * len(active)
        for r, p in enumerate(active):
            histories[p].append({"epoch": epoch + 1, "train_loss": losses_epoch[r], "train_acc": accs[r], "lr": lr})
        log.info(f"[bundle] epoch {epoch + 1}/{epochs} lr={lr:.4g} loss=[{' '.join(f'{v:.4f}' for v in losses_epoch)}] "
                 f"acc=[{' '.join(f'{v:.4f}' for v in accs)}] ({len(active)} members, "
                 f"elapsed={time.perf_counter() - t0:.1f}s)")
        if every and (epoch + 1) % every == 0 and epoch + 1 < epochs:
            for r, p in enumerate(active):
                m = members[p]
                if m.state_path is not None:
                    write_state(m.state_path, stack.member_state(r), *stack.member_opt_state(opt, r), gens[p],
                                epoch + 1, histories[p], m.digest)
    seconds = time.perf_counter() - t0
    for r, p in enumerate(active):
        load_into(members[p].model, stack.member_state(r))
    for res in results:
        res["train_seconds"] = seconds
