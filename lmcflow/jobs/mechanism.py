"""Rule ``mechanism``: the width paper's per-layer mechanism metrics along the (aligned) path of each seed pair."""
from __future__ import annotations

import logging
import time

from lmcflow.alignment import aligned_pair, load_alignment_block
from lmcflow.checkpoints import load_models
from lmcflow.config import Point, mechanism_lambdas, mechanism_params
from lmcflow.data import load_dataset
from lmcflow.evaluation import resolve_device
from lmcflow.mechanism import active_overlap_rows, layer_metrics
from lmcflow.models import has_batchnorm
from lmcflow.tables import point_columns, write_table

log = logging.getLogger(__name__)


def run_mechanism_block(point: Point, method: str, pairs: list, models: dict, alignment: list | None,
                        data: str, out: str, device: str = "auto", out_overlap: str | None = None) -> None:
    """LEWC/LLFC, weak additivity, reciprocal orthogonality, low rank and neuron activity of every (aligned) seed
    pair of a pair block, per hidden layer on the λ grid (``lmcflow.mechanism.layer_metrics``), with LEWC of A
    and a random perturbation of A as far away as B (seeded by the pair).

    λ: ``analysis.mechanism.lambdas`` (paper convention, weight on θ_A) or the merge λ grid.
    Inputs: the first ``analysis.mechanism.samples`` test examples; BatchNorm statistics of every
    θ_λ are re-estimated on training data (``merge.bn_reset_size``) when the model has BatchNorm.
    ``alignment``: [permutation file, alignment rows] of rule align (None for identity). ``out_overlap``: the
    active-unit overlap at every τ of ``analysis.mechanism.active_thresholds`` and ``active_threshold`` (table
    ``active_overlap``).
    """
    dev = resolve_device(device)
    mp = mechanism_params(point)
    dataset = load_dataset(data).to(dev)
    loaded = load_models(models, dev)
    perms = load_alignment_block(point, method, *alignment) if method != "identity" else {}
    x = dataset.x["test"][: int(mp["samples"])] if mp["samples"] else dataset.x["test"]
    bn = point.merge["bn_reset_size"]
    lambdas = mechanism_lambdas(point)  # layer_metrics holds one model per λ in memory
    out_rows, overlap_rows = [], []
    taus = [float(mp["active_threshold"]), *(float(t) for t in mp.get("active_thresholds") or [])]
    for seed_a, seed_b in pairs:
        t0 = time.perf_counter()
        model_a, model_b, dense = aligned_pair(loaded[seed_a], loaded[seed_b], perms.get((seed_a, seed_b)))
        x_bn = (dataset.x["train"][:bn] if bn else dataset.x["train"]) if has_batchnorm(model_a) else None
        rows = layer_metrics(model_a, model_b, x, lambdas, batch_size=int(mp["batch_size"]), x_bn=x_bn,
                             energy=float(mp["energy"]), active_threshold=float(mp["active_threshold"]),
                             perturbation_seed=f"{seed_a}-{seed_b}")
        pair = {**point_columns(point), "seed_a": seed_a, "seed_b": seed_b, "method": method, "n_samples": len(x)}
        base = {**pair, "energy": float(mp["energy"]), "dense_form": dense}
        if out_overlap:
            overlap_rows += [{**pair, **r} for r in active_overlap_rows(model_a, model_b, x, taus,
                                                                        int(mp["batch_size"]))]
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
    if out_overlap:
        write_table(out_overlap, "active_overlap", overlap_rows)
