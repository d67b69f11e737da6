"""``lmcflow trace <claim>``: a claim's chain from its verdict to the config keys it depends on, read from the
claim registry, the plan of a config and the rule table (``lmcflow.plan.ruletable``; each rule's file and line
from the rule files): verdict → statistic function → tables it reads → the rules (and their job functions) that
make them, down to the data → config keys."""
from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

from lmcflow.claims import REGISTRY
from lmcflow.config import DEFAULT_CONFIG, POINT_BLOCKS, ConfigError
from lmcflow.plan.dag import needed_jobs, producers
from lmcflow.plan.facade import Plan
from lmcflow.plan.rulefiles import CHECKOUT, def_line, read_rules, rel, where_defined
from lmcflow.plan.ruletable import RULES, Rule, evaluate


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
        if claim not in plan.claims.cfg_of:
            raise ConfigError(f"{config} does not configure claim {claim!r} (claims.{claim})")
        return plan, config
    for path in shipped_configs():
        plan = Plan.from_files([] if path == DEFAULT_CONFIG else [path])
        if claim in plan.claims.cfg_of:
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


def job_function(rule: Rule):
    """The lmcflow function a rule's script calls (the rule table's ``job``), or None."""
    if rule.job is None:
        return None
    module, name = rule.job.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def param_values(plan: Plan, rule: Rule, job) -> dict:
    """The params of a job whose expression names a plan function of the wildcards (``PLAN.<part>.f``) or reads
    the config; in a loop-defined rule, also ``PLAN.<part>.f(VAR)``: a plan function of the loop's value, giving a
    value or a function of the wildcards."""
    out = {}
    for name, expr in rule.params.items():
        if expr.startswith('config["'):
            out[name] = ("config", expr.split('"')[1])
        elif re.fullmatch(r"PLAN(\.\w+)+", expr) and callable(eval(expr, {"PLAN": plan})):  # noqa: S307
            out[name] = evaluate(plan, rule, expr, job.wc)
        elif rule.loop and re.fullmatch(rf"PLAN(\.\w+)+\({rule.loop[0]}\)", expr):
            out[name] = evaluate(plan, rule, expr, job.wc)
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
    out_json = Path(results or plan.paths.results) / "claims" / f"{claim}.json"
    lines = [f"claim {claim} ({entry.paper}): {entry.statement}", f"config: {source}"]
    if out_json.is_file():
        lines.append(f"verdict: {json.loads(out_json.read_text())['verdict']} ({out_json})")
    else:
        lines.append(f"verdict: not run yet (no {out_json})")
    fn = entry.evaluate
    lines.append(f"statistic: {fn.__module__}.{fn.__qualname__}  {where_defined(fn)}")
    lines.append("tables:")
    for kind, paths in plan.targets.claim_tables(claim).items():
        lines += [f"  {kind:20s} {p}" for p in paths]
    lines.append("rules (nearest first; rule  file:line  script -> job function  file:line  jobs):")
    chain = upstream(plan, [plan.paths.claim_file(claim)])
    points: dict = {}
    other_keys: set = set()
    for name, jobs in chain:
        r, where = RULES[name], rules[name].where()
        f = job_function(r)
        calls = f"{f.__module__}.{f.__name__}  {where_defined(f)}" if f else ""
        script = rel(CHECKOUT / "workflow/scripts" / r.script) if r.script else "(no script)"
        n = f"{len(jobs)} job{'s' * (len(jobs) > 1)}"
        lines.append(f"  {name:32s} {where:36s} {script} -> {calls or '-'}  ({n})")
        for job in jobs:
            for pname, value in param_values(plan, r, job).items():
                if isinstance(value, tuple) and value[:1] == ("config",):
                    other_keys.add(value[1])
                elif pname == "data_cfg":
                    other_keys.update(f"data.{k}" for k in value)
                else:
                    point_keys(value, points)
    lines.append("config keys:")
    ccfg = plan.claims.cfg_of[claim] or {}
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
