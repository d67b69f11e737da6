"""``lmcflow trace <claim>``: a claim's chain from its verdict to the config keys it depends on, read from the
claim registry, the plan of a config and the rule files: verdict → statistic function → tables it reads →
the rules (and the job functions their scripts call) that make them, down to the data → config keys."""
from __future__ import annotations

import json
from pathlib import Path

from lmcflow.claims import REGISTRY
from lmcflow.config import DEFAULT_CONFIG, POINT_BLOCKS, ConfigError
from lmcflow.plan.dag import needed_jobs, producers
from lmcflow.plan.rulefiles import def_line, job_functions, read_rules, rel, where_defined
from lmcflow.plan.rules import Plan


def shipped_configs() -> list[Path]:
    """The default config first, then the other shipped configs."""
    others = sorted(p for p in DEFAULT_CONFIG.parent.glob("*.yaml") if p != DEFAULT_CONFIG)
    return [DEFAULT_CONFIG, *others]


def plan_for(claim: str, config: str | None) -> tuple[Plan, str]:
    """The plan of ``config``, or (none given) of the first shipped config that configures ``claim``."""
    if claim not in REGISTRY:
        raise ConfigError(f"no claim {claim!r}; registered: {', '.join(sorted(REGISTRY))}")
    if config is not None:
        plan = Plan.from_files([config])
        if claim not in plan.claim_cfg:
            raise ConfigError(f"{config} does not configure claim {claim!r} (claims.{claim})")
        return plan, config
    for path in shipped_configs():
        plan = Plan.from_files([] if path == DEFAULT_CONFIG else [path])
        if claim in plan.claim_cfg:
            return plan, rel(path)
    raise ConfigError(f"no shipped config configures claim {claim!r}; pass one with --config")


def upstream(plan: Plan, files: list[str]) -> list[tuple[str, list]]:
    """[(rule, its jobs)] of every job that the files need, nearest first (each rule once)."""
    made = producers(needed_jobs(plan))
    order: dict[str, list] = {}
    frontier, seen = list(files), set()
    while frontier:
        nxt = []
        for f in frontier:
            job = made[f]
            if id(job) in seen:
                continue
            seen.add(id(job))
            order.setdefault(job.rule, []).append(job)
            nxt += job.input_files()
        frontier = nxt
    return list(order.items())


def param_values(plan: Plan, rule, job) -> dict:
    """The params of a job whose expression names a plan function of the wildcards (``PLAN.f``) or reads the
    config; in a loop-defined rule, also ``PLAN.f(VAR)``: a plan function of the loop's value, giving a value or
    a function of the wildcards."""
    out = {}
    for name, expr in rule.params.items():
        expr = expr.removeprefix("PLAN.")
        if expr.startswith('config["'):
            out[name] = ("config", expr.split('"')[1])
        elif expr.isidentifier() and callable(getattr(plan, expr, None)):
            out[name] = getattr(plan, expr)(job.wc)
        elif rule.loop and expr.endswith(f"({rule.loop[0]})") and callable(getattr(plan, expr.split("(")[0], None)):
            value = getattr(plan, expr.split("(")[0])(rule.loop[1])
            out[name] = value(job.wc) if callable(value) else value
    return out


def point_keys(value, found: dict) -> None:
    """{study: {block: {keys}}} of every point job dict inside a params value."""
    if isinstance(value, dict):
        if {"study", "point", "dataset"} <= set(value):
            blocks = found.setdefault(value["study"], {})
            blocks.setdefault("dataset", set())
            for block in POINT_BLOCKS:
                if isinstance(value.get(block), dict):
                    blocks.setdefault(block, set()).update(value[block])
            return
        for v in value.values():
            point_keys(v, found)
    elif isinstance(value, (list, tuple)):
        for v in value:
            point_keys(v, found)


def trace(claim: str, config: str | None = None, results: str | None = None) -> str:
    plan, source = plan_for(claim, config)
    entry = REGISTRY[claim]
    rules = read_rules()
    out_json = Path(results or plan.results) / "claims" / f"{claim}.json"
    lines = [f"claim {claim} ({entry.paper}): {entry.statement}", f"config: {source}"]
    if out_json.is_file():
        lines.append(f"verdict: {json.loads(out_json.read_text())['verdict']} ({out_json})")
    else:
        lines.append(f"verdict: not run yet (no {out_json})")
    fn = entry.evaluate
    lines.append(f"statistic: {fn.__module__}.{fn.__qualname__}  {where_defined(fn)}")
    lines.append("tables:")
    for kind, paths in plan.claim_tables(claim).items():
        lines += [f"  {kind:20s} {p}" for p in paths]
    lines.append("rules (nearest first; rule  file:line  script -> job function  file:line  jobs):")
    chain = upstream(plan, [plan.claim_file(claim)])
    points: dict = {}
    other_keys: set = set()
    for name, jobs in chain:
        r = rules[name]
        funcs = job_functions(r.script) if r.script else []
        calls = ", ".join(f"{f.__module__}.{f.__name__}  {where_defined(f)}" for f in funcs)
        script = rel(r.script) if r.script else "(no script)"
        n = f"{len(jobs)} job{'s' * (len(jobs) > 1)}"
        lines.append(f"  {name:32s} {r.where():36s} {script} -> {calls or '-'}  ({n})")
        for job in jobs:
            for pname, value in param_values(plan, r, job).items():
                if isinstance(value, tuple) and value[:1] == ("config",):
                    other_keys.add(value[1])
                elif pname == "data_cfg":
                    other_keys.update(f"data.{k}" for k in value)
                else:
                    point_keys(value, points)
    lines.append("config keys:")
    ccfg = plan.claim_cfg[claim] or {}
    lines.append(f"  claims.{claim}.study = {ccfg.get('study')}")
    for k, v in entry.params(ccfg).items():
        lines.append(f"  claims.{claim}.{k} = {v!r}{'' if k in ccfg else ' (default)'}")
    for study, blocks in points.items():
        for block, keys in blocks.items():
            shown = "" if block == "dataset" else "." + "{" + ", ".join(sorted(keys)) + "}"
            lines.append(f"  studies.{study}.{block}{shown}")
    lines += [f"  {k}" for k in sorted(other_keys)]
    return "\n".join(lines)


__all__ = ["def_line", "trace"]
