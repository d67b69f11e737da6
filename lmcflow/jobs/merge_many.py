"""Rule ``merge_many``: N-way merges of a point's seeds (every N-subset, every N-way method), plain and REPAIR'd,
beside the mean endpoint and the N models' logit ensemble (table ``merge_many``)."""
from __future__ import annotations

import copy
import itertools
import logging
import time

import torch

from lmcflow.alignment import apply_permutation, permutation_spec, to_dense_form
from lmcflow.checkpoints import as_point, load_datasets, load_models
from lmcflow.config import Point, alignment_params, repairs, repairs_method
from lmcflow.evaluation import resolve_device
from lmcflow.merge_many import align_many, average_states, many_outputs, merge_scores
from lmcflow.merging import path_inputs
from lmcflow.models import has_batchnorm
from lmcflow.repair import endpoint_stats, goal_stats, repair_plan, repair_state
from lmcflow.seeding import derive_seed
from lmcflow.tables import point_columns, write_table

log = logging.getLogger(__name__)


def run_merge_many(point: Point, models: dict, data: str, out: str, device: str = "auto") -> None:
    """Rows of table ``merge_many`` for one point: ``models`` {seed: [checkpoint, run row]} of all its seeds."""
    dev = resolve_device(device)
    point = as_point(point)
    dataset = load_datasets({point.dataset: data}, [point], dev)[point.dataset]
    write_table(out, "merge_many", merge_many_rows(point, load_models(models, dev), dataset))


@torch.no_grad()
def merge_many_rows(point: Point, loaded: dict, data) -> list[dict]:
    """For every N of ``merge.many.sizes``, every N-subset of the seeds (ascending) and every method of
    ``merge.many.methods``: the merged model's scores (REPAIR'd too with ``merge.repair.enabled``; its goal is
    the mean of the N endpoints' statistics), with the subset's mean endpoint and logit ensemble beside them."""
    many = point.merge["many"]
    splits, splits_out, x_bn = path_inputs(data, point.merge["train_eval_size"], point.merge["bn_reset_size"])
    y = {s: ys for s, (_, ys) in splits.items()} | {"val": data.y["val"]}
    nets = {}
    for seed, m in loaded.items():
        nets[seed] = copy.deepcopy(m)
        to_dense_form(nets[seed])
    reset = x_bn if has_batchnorm(next(iter(nets.values()))) else None
    scratch = copy.deepcopy(next(iter(nets.values())))
    ends = {s: many_outputs(scratch, m.state_dict(), splits_out, reset) for s, m in nets.items()}
    x_rep = data.x["train"][:int(point.merge["repair"]["examples"])] if repairs(point) else None
    plan = repair_plan(scratch, x_example=data.x["train"][:1]) if x_rep is not None else None
    ap = alignment_params(point)
    x_match = data.x["train"][:int(ap["samples"])] if ap["samples"] else data.x["train"]
    spec = permutation_spec(scratch)
    rows = []
    for n in [int(n) for n in many["sizes"] if int(n) <= len(nets)]:  # the plan schedules points with many_sizes
        for subset in itertools.combinations(sorted(nets), n):
            members = [nets[s] for s in subset]
            for method in many["methods"]:
                t0 = time.perf_counter()
                seed = derive_seed("merge_many", point.study, point.point, method, *subset)
                perms, info = align_many(method, spec, members, x_match, seed=seed, max_iter=int(ap["max_iter"]),
                                         batch_size=int(ap["batch_size"]), init=ap["init"])
                states = [apply_permutation(spec, m.state_dict(), p) for m, p in zip(members, perms, strict=True)]
                merged = average_states(states)
                variants = {False: merged}
                if x_rep is not None and repairs_method(point, method):
                    aligned = []
                    for st in states:
                        scratch.load_state_dict(st)
                        aligned.append(endpoint_stats(scratch, x_rep, plan))
                    goal = goal_stats(aligned, [1.0 / n] * n)
                    variants[True] = repair_state(scratch, merged, goal, x_rep, plan)
                for repaired, state in variants.items():
                    outs = many_outputs(scratch, state, splits_out, None if repaired and reset is not None else reset)
                    base = {**point_columns(point), "seeds": ",".join(map(str, subset)), "n_models": n,
                            "method": method, "repair": repaired, "rounds": int(info["rounds"])}
                    rows += [{**base, **r} for r in merge_scores(outs, [ends[s] for s in subset], y)]
                plain = rows[-2 * len(variants)]
                log.info(f"[merge_many] {point.study}/{point.point} seeds {subset} {method}: merged test error "
                         f"{plain['merged_test_error']:.4f}, mean endpoint {plain['endpoint_test_error']:.4f}, "
                         f"ensemble {plain['ensemble_test_error']:.4f} ({info['rounds']} rounds, "
                         f"{time.perf_counter() - t0:.1f}s)")
    return rows
