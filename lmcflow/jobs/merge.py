"""Rule ``interpolate``: the loss and error along the linear path between two models, for every merge method."""
from __future__ import annotations

import logging
import time

from lmcflow.alignment import aligned_pair, load_alignment_block
from lmcflow.checkpoints import as_point, load_datasets, load_models
from lmcflow.config import Point, lambda_grid, repairs, repairs_method
from lmcflow.evaluation import resolve_device
from lmcflow.merging import check_same_function, endpoint_outputs, evaluate_path
from lmcflow.payloads import MergeEntry
from lmcflow.repair import path_repair
from lmcflow.state import like_state
from lmcflow.tables import point_columns, write_table

log = logging.getLogger(__name__)


def run_merge_block(point: Point, pairs: list, methods: list, models: dict, alignment: dict, data_path: str,
                    out: str, device: str = "auto") -> None:
    """``run_merge_group`` for one point."""
    run_merge_group([MergeEntry(point=point, methods=methods, models=models, alignment=alignment)], pairs,
                    {as_point(point).dataset: data_path}, out, device)


def run_merge_group(entries: list[MergeEntry], pairs: list, data: dict, out: str, device: str = "auto") -> None:
    """Rule ``interpolate``: the paths of every point of a grid group (``lmcflow.grouping.grid_groups``) for one
    pair block, in one file. ``entries``: one ``lmcflow.payloads.MergeEntry`` per point (``PLAN.merge.entries``);
    ``data``: dataset -> prepared file (each dataset loaded once)."""
    dev = resolve_device(device)
    points = [as_point(e["point"]) for e in entries]
    datasets = load_datasets(data, points, dev)
    rows = []
    for point, e in zip(points, entries, strict=True):
        rows += merge_rows(point, pairs, e["methods"], e["models"], e.get("alignment") or {}, datasets[point.dataset],
                           dev)
    write_table(out, "interpolation", rows)


def merge_rows(point: Point, pairs: list, methods: list, models: dict, alignment: dict, data, dev) -> list[dict]:
    """Paths θ(λ) = (1−λ)θ_A + λθ_B of every seed pair of a pair block, for every merge method. For method ≠
    identity, B is first permuted by rule ``align``'s permutations (``alignment``: {method: [permutation
    file, alignment rows]}, hash-verified); models with symmetry-breaking layers are interpolated in dense
    form (W_eff). Each model is loaded once. With ``merge.repair.enabled`` every path is evaluated a second time
    with REPAIR at each λ (rows ``repair`` true; its statistics on the first ``merge.repair.examples`` training
    inputs; methods ``merge.repair.methods``); REPAIR changes nothing at λ = 0 and 1, so both curves share the
    endpoints' outputs."""
    loaded = load_models(models, dev)
    perms = {m: load_alignment_block(point, m, *alignment[m]) for m in methods if m != "identity"}
    lambdas = lambda_grid(int(point.merge["lambdas"]))
    eval_sizes = {"train_eval_size": point.merge["train_eval_size"], "bn_reset_size": point.merge["bn_reset_size"]}
    x_repair = data.x["train"][:int(point.merge["repair"]["examples"])] if repairs(point) else None
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
            live = model_a.state_dict()  # evaluate_path loads θ(λ) into model_a: sd_a is a copy
            sd_a = like_state(((k, v.clone()) for k, v in live.items()), live)
            sd_b = model_b.state_dict()
            if perm is not None:
                _, unpermuted_b, _ = aligned_pair(loaded[seed_a], loaded[seed_b], None)
                check_same_function(model_a, unpermuted_b.state_dict(), sd_b, data.x["test"][:256],
                                    f"{point.study}/{point.point} pair ({seed_a},{seed_b}) {method}")
            given = {0.0: ends[seed_a], 1.0: ends[seed_b]}
            fixes = {False: None}
            if x_repair is not None and repairs_method(point, method):
                fixes[True] = path_repair(model_a, model_b, x_repair)
            for repaired, fix in fixes.items():
                path = evaluate_path(model_a, sd_a, sd_b, data, lambdas, **eval_sizes, endpoints=given, repair=fix)
                base = {**point_columns(point), "seed_a": seed_a, "seed_b": seed_b, "method": method,
                        "repair": repaired}
                rows += [{**base, **r} for r in path]
                mid = [r for r in path if r["split"] == "test" and abs(r["lam"] - 0.5) < 1e-9][0]
                log.info(f"[merge] {point.study}/{point.point} pair ({seed_a},{seed_b}) {method}"
                         f"{' with REPAIR' if repaired else ''}: test error at λ=½ {mid['error']:.4f}, "
                         f"{len(lambdas)} λ in {time.perf_counter() - t0:.1f}s")
    return rows


