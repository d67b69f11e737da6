"""Rule ``align``: permutations aligning model B to model A, saved per pair block (read back, verified, by
``lmcflow.alignment.load_alignment_block``)."""
from __future__ import annotations

import copy
import logging
import time

import torch

from lmcflow.alignment import align, save_permutation_sets, to_dense_form
from lmcflow.checkpoints import device_name, load_models
from lmcflow.config import Point, alignment_params
from lmcflow.data import load_dataset
from lmcflow.evaluation import resolve_device
from lmcflow.seeding import derive_seed
from lmcflow.tables import point_columns, write_table

log = logging.getLogger(__name__)


def run_align_block(point: Point, method: str, pairs: list, models: dict, data: str, out_perms: str,
                    out_rows: str, device: str = "auto") -> None:
    """Permutations aligning model B to model A (``lmcflow.alignment.align``) for every seed pair of a pair block,
    saved together as one safetensors file (``lmcflow.alignment.save_permutation_sets``); one alignment row per pair.

    Models with symmetry-breaking layers are aligned in dense form (W_eff, see
    ``alignment.to_dense_form``). The file's SHA-256 goes into every row; ``load_alignment_block``
    checks it before the permutations are applied. The file holds nothing but the permutations and
    what determines them (no timings: the same computation gives the same bytes).
    """
    dev = resolve_device(device)
    ap = alignment_params(point)
    loaded = load_models(models, dev)
    x, kw = None, {}
    if method == "activation_matching":
        xtr = load_dataset(data).x["train"]
        x = (xtr[: int(ap["samples"])] if ap["samples"] else xtr).to(dev)
        kw["batch_size"] = int(ap["batch_size"])
    elif method == "weight_matching":
        kw["max_iter"] = int(ap["max_iter"])
        kw["init"] = ap["init"]
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
                     "dense_form": dense, "device": device_name(dev)})
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
