"""What each job asks a cluster for (``runtime``, ``mem_mb``, ``gpu``) and whether it fits the run's limit.

A job's request comes from ``lmcflow.plan.cost`` (its work, estimated), unless every point of the job sets
``train.resources`` / ``merge.resources`` ``runtime`` (or ``mem_mb``) explicitly: then that value, scaled by
``max(1, width)**width_exponent`` (a train job: × its models; a grid group's job: the sum of its points'
runtimes and the largest memory), overrides the estimate. The limit is ``cluster.max_runtime`` (minutes) and
``cluster.max_mem_mb``; grid groups are split to fit it (``group_fits``), and a job of a single point that
cannot fit is refused before any work (``check_limits``). Details: docs/cluster.md.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from lmcflow.config import ConfigError, many_sizes, mechanism_methods, merge_methods
from lmcflow.config.partners import REAL
from lmcflow.grouping import pair_blocks, seed_blocks, stacks
from lmcflow.plan import cost

CLUSTER_DEFAULTS = {"max_runtime": None, "max_mem_mb": None, "safety": 1.5, "job_overhead_s": 60}


@dataclass(frozen=True)
class Request:
    seconds: float  # estimated run time of the job (start-up and work; no safety factor)
    runtime: int  # minutes asked for
    mem_mb: int  # MB asked for
    gpu: int
    device: str  # what the estimate assumed: "cpu" or "gpu"
    estimated: bool  # False: runtime from an explicit resources.runtime


def cluster_cfg(config: dict) -> dict:
    return {**CLUSTER_DEFAULTS, **(config.get("cluster") or {})}


def _explicit(points, block: str, key: str, n_models: int = 1):
    """The explicit ``resources[key]`` of every point, scaled (see module doc); None unless all set it."""
    values = []
    for p in points:
        res = getattr(p, block)["resources"]
        if res.get(key) is None:
            return None
        v = res[key] * max(1.0, float(p.model["width"])) ** float(res.get("width_exponent") or 0)
        values.append(v * (n_models if key == "runtime" and block == "train" else 1))
    return int(math.ceil(sum(values) if key == "runtime" else max(values)))


def _request(points, block: str, seconds: float, mem: float, device: str, config: dict, n_models: int = 1):
    cl = cluster_cfg(config)
    runtime = _explicit(points, block, "runtime", n_models)
    mem_mb = _explicit(points, block, "mem_mb")
    gpu = max(int(getattr(p, block)["resources"].get("gpu") or 0) for p in points)
    return Request(seconds, cost.request_minutes(seconds, cl) if runtime is None else runtime,
                   cost.request_mem_mb(mem, cl) if mem_mb is None else mem_mb, gpu, device, runtime is None)


def _rates(points, block: str, config: dict):
    res = {"gpu": max(int(getattr(p, block)["resources"].get("gpu") or 0) for p in points)}
    precision = "fp32" if any(p.train["precision"] == "fp32" for p in points) else "bf16"
    return cost.device_rates(res, int(config["threads"]["train" if block == "train" else "merge"]), precision,
                             points[0].model["arch"])


def train_request(points, n_models: int, config: dict) -> Request:
    """The train job of ``points`` (a grid group) for a seed block of ``n_models`` seeds."""
    device, rates = _rates(points, "train", config)
    data = config["data"]
    bundles = stacks(points, data)
    secs = rates["startup_cpu_s"] + cost.train_seconds(bundles, n_models, data, rates)
    return _request(points, "train", secs, cost.train_mem_mb(bundles, n_models, data, device), device, config,
                    n_models)


def merge_request(work: Callable, points, n: int, config: dict, method: str | None = None) -> Request:
    """A merge-side job of ``points`` doing ``work(points, n, data, rates, method)`` seconds of work (``n``: its
    models or pairs; ``method``: a point-pair job's method)."""
    device, rates = _rates(points, "merge", config)
    data = config["data"]
    return _request(points, "merge", rates["startup_cpu_s"] + work(points, n, data, rates, method),
                    cost.merge_mem_mb(points, data, device), device, config)


# the jobs of a compute rule: a grid group's seed block, a grid group's pair block, one point's pair block (and
# method), or one point
GROUP_BLOCK, GROUP_PAIR, POINT_PAIR, POINT = "group block", "group pair block", "point pair block", "point"


@dataclass(frozen=True)
class Compute:
    """The cost column of a compute rule in ``lmcflow.plan.ruletable``: what one job asks a cluster for."""

    name: str
    unit: str  # GROUP_BLOCK, GROUP_PAIR, POINT_PAIR or POINT
    threads: str  # the config's threads.<threads> the job runs on
    work: Callable | None  # (points, n, data, rates, method) -> seconds; None: a train job (train_request)
    # whether a grid group's points (a point, for POINT_PAIR and POINT) have such jobs, as the limit check counts
    them: Callable
    methods: Callable | None = None  # POINT_PAIR: a point's methods, one job each

    def request(self, points, n: int, config: dict, method: str | None = None) -> Request:
        if self.work is None:
            return train_request(points, n, config)
        return merge_request(self.work, points, n, config, method)


TRAIN = Compute("train", GROUP_BLOCK, "train", None, lambda pts: True)
SWAP_COSTS = Compute("swap_costs", GROUP_BLOCK, "merge", lambda pts, n, d, r, m: cost.swap_seconds(pts, n, d, r),
                     lambda pts: any(p.analysis["swap_costs"] for p in pts))
INTERPOLATE = Compute("interpolate", GROUP_PAIR, "merge",
                      lambda pts, n, d, r, m: cost.interpolate_seconds(pts, n, d, r),
                      lambda pts: any(int(p.train["epochs"]) > 0 for p in pts))
IDENTIFIABILITY = Compute("identifiability", GROUP_PAIR, "merge",
                          lambda pts, n, d, r, m: cost.identifiability_seconds(pts, n, d, r),
                          lambda pts: any(p.analysis["identifiability"] for p in pts))
ALIGN = Compute("align", POINT_PAIR, "merge", lambda pts, n, d, r, m: cost.align_seconds(pts[0], m, n, d, r),
                lambda p: int(p.train["epochs"]) > 0, lambda p: [m for m in merge_methods(p) if m != "identity"])
MECHANISM = Compute("mechanism", POINT_PAIR, "merge", lambda pts, n, d, r, m: cost.mechanism_seconds(pts[0], n, d, r),
                    lambda p: int(p.train["epochs"]) > 0, mechanism_methods)
MERGE_MANY = Compute("merge_many", POINT, "merge", lambda pts, n, d, r, m: cost.merge_many_seconds(pts[0], d, r),
                     lambda p: int(p.train["epochs"]) > 0 and bool(many_sizes(p)) and p.partner == REAL)
COMPUTE = (TRAIN, SWAP_COSTS, INTERPOLATE, IDENTIFIABILITY, ALIGN, MECHANISM, MERGE_MANY)  # ``lmcflow plan``'s order


def group_requests(points, config: dict) -> list[tuple[str, str, Request]]:
    """(rule, block label, request) of every seed-block and pair-block job of a grid group's ``points``."""
    out = []
    for b, seeds in seed_blocks(points[0]).items():
        out += [(c.name, str(b), c.request(points, len(seeds), config)) for c in COMPUTE
                if c.unit == GROUP_BLOCK and c.them(points)]
    for (i, j), pairs in pair_blocks(points[0]).items():
        out += [(c.name, f"{i}-{j}", c.request(points, len(pairs), config)) for c in COMPUTE
                if c.unit == GROUP_PAIR and c.them(points)]
    return out


def _fits(req: Request, cl: dict) -> bool:
    return ((cl["max_runtime"] is None or req.runtime <= cl["max_runtime"])
            and (cl["max_mem_mb"] is None or req.mem_mb <= cl["max_mem_mb"]))


def group_fits(config: dict):
    """None without a limit; else a predicate: every job of a candidate grid group fits ``cluster``'s limit."""
    cl = cluster_cfg(config)
    if cl["max_runtime"] is None and cl["max_mem_mb"] is None:
        return None
    return lambda points: all(_fits(r, cl) for _, _, r in group_requests(points, config))


def check_limits(groups: dict, points: dict, config: dict) -> None:
    """Refuse a config with a job above ``cluster``'s limit (only a single point's job can be: grid groups were
    split to fit), naming the point, the job, its request and what would make it fit."""
    cl = cluster_cfg(config)
    if cl["max_runtime"] is None and cl["max_mem_mb"] is None:
        return
    bad = [(f"{s}/{pts[0].point}", rule, label, r) for (s, _g), pts in groups.items()
           for rule, label, r in group_requests(pts, config) if not _fits(r, cl)]
    bad += [(f"{p.study}/{p.point}", rule, label, r) for p, rule, label, r in point_requests(points, config)
            if not _fits(r, cl)]
    if not bad:
        return
    where, rule, label, r = bad[0]
    hint = ("lower train.bundle (fewer models per job) or train.epochs there" if rule == TRAIN.name else
            "lower train.bundle (fewer pairs per job) or the rule's work there")
    raise ConfigError(
        f"cluster: point {where}: its {rule} job (block {label}) asks for {r.runtime} min and {r.mem_mb} MB "
        f"(estimated {r.seconds / 3600:.1f} h × safety {cl['safety']}), above cluster.max_runtime = "
        f"{cl['max_runtime']} min / cluster.max_mem_mb = {cl['max_mem_mb']}; {hint}, or raise the limit "
        f"({len(bad)} job(s) above it; `lmcflow plan` lists them)")


def point_requests(points: dict, config: dict) -> list:
    """(point, rule, block label, request) of every point-pair and point job of ``points`` ((study, id) -> Point)."""
    out = []
    for p in points.values():
        for (i, j), pairs in pair_blocks(p).items():
            out += [(p, c.name, f"{m} {i}-{j}", c.request([p], len(pairs), config, m)) for c in COMPUTE
                    if c.unit == POINT_PAIR and c.them(p) for m in c.methods(p)]
        out += [(p, c.name, "", c.request([p], 0, config)) for c in COMPUTE if c.unit == POINT and c.them(p)]
    return out
