"""``lmcflow trace``: for every registered claim, each file:line it prints is a ``def`` of the function it names,
each rule is in the .smk file it names, and each script and job function exists."""
import importlib
import json
import re
from pathlib import Path

import pytest

from lmcflow.claims import REGISTRY
from lmcflow.cli import main

REPO = Path(__file__).resolve().parents[1]
WHERE = r"(lmcflow(?:\.\w+)+)  ([\w/.-]+\.py):(\d+)"


def trace_text(capsys, *args) -> str:
    assert main(["trace", *args]) == 0
    return capsys.readouterr().out


def assert_def(dotted: str, path: str, line: int) -> None:
    module, _, name = dotted.rpartition(".")
    assert callable(getattr(importlib.import_module(module), name)), dotted
    text = (REPO / path).read_text().splitlines()
    assert re.match(rf"\s*(async\s+)?def {name}\(", text[line - 1]), f"{path}:{line} is not def {name}"


def defines(lines: list[str], line: int, rule: str) -> bool:
    """Line ``line`` is ``rule RULE:``, or a ``rule:`` in a for loop whose ``name:`` f-string can make RULE."""
    if lines[line - 1] == f"rule {rule}:":
        return True
    loop = next(text for text in reversed(lines[:line - 1]) if text.startswith("for "))
    var = re.match(r"for (\w+) in ", loop)[1]
    name = lines[lines.index("        name:", line - 1) + 1].strip()
    pattern = re.escape(name.removeprefix('f"').removesuffix('"')).replace(re.escape("{" + var + "}"), r"\w+")
    return lines[line - 1] == "    rule:" and re.fullmatch(pattern, rule) is not None


@pytest.mark.parametrize("claim", sorted(REGISTRY))
def test_trace_names_what_exists(claim, capsys, tmp_path):
    out = trace_text(capsys, claim, "--results", str(tmp_path))
    assert f"verdict: not run yet (no {tmp_path}/claims/{claim}.json)" in out
    stat = re.search(rf"^statistic: {WHERE}$", out, re.M)
    assert stat and stat[1].endswith("." + REGISTRY[claim].evaluate.__name__)
    assert_def(stat[1], stat[2], int(stat[3]))
    for kind in REGISTRY[claim].tables:
        assert re.search(rf"^  {kind}\s+work/tables/\S+/{kind}\.parquet$", out, re.M), kind
    rule_line = r"^  (\w+)\s+(workflow/rules/\w+\.smk):(\d+)\s+(workflow/scripts/\w+\.py) -> (.+)  \(\d+ jobs?\)$"
    rules = re.findall(rule_line, out, re.M)
    names = [r[0] for r in rules]
    assert names[0] == "claim" and "prepare_data" in names and "train" in names
    for rule, smk, line, script, calls in rules:
        assert defines((REPO / smk).read_text().splitlines(), int(line), rule), f"{smk}:{line} is not rule {rule}"
        assert (REPO / script).is_file()
        found = re.findall(WHERE, calls)
        assert found, f"rule {rule}: no job function"
        for dotted, path, ln in found:
            assert_def(dotted, path, int(ln))
    assert f"  claims.{claim}.study = " in out
    assert re.search(r"^  studies\.\w+\.model\.\{.*\bwidth\b.*\}$", out, re.M)


def test_trace_prints_a_made_verdict(capsys, tmp_path):
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims/lewc.json").write_text(json.dumps({"verdict": "inconclusive"}))
    out = trace_text(capsys, "lewc", "--results", str(tmp_path))
    assert f"verdict: inconclusive ({tmp_path}/claims/lewc.json)" in out
    assert re.search(r"^  mechanism\s+workflow/rules/mechanism\.smk:\d+ .* -> lmcflow\.[\w.]+\.run_mechanism_block ",
                     out, re.M)
    assert "  studies.width.analysis.{mechanism}" in out


def test_trace_refuses_unknown_claims_and_unconfigured_ones(capsys):
    assert main(["trace", "no-such-claim"]) == 2
    assert "lmcflow trace: no claim 'no-such-claim'; registered: " in capsys.readouterr().err
    assert main(["trace", "lewc", "--config", str(REPO / "config/paper_identifiability.yaml")]) == 2
    assert "does not configure claim 'lewc'" in capsys.readouterr().err


def test_the_rule_files_hold_the_plans_rules_and_their_params_are_plan_functions(tmp_path, monkeypatch):
    """The trace reads each job's params through the plan: every params entry of a rule names a plan function of
    the wildcards, reads the config, passes a wildcard, or is a constant; in a loop-defined rule, it may also be
    the loop's value or a plan function of it. The rules are those of the default config's jobs and of a study of
    imported checkpoints (examples/imported, with stand-in checkpoint files)."""
    from lmcflow.plan import load_plan, rule_jobs
    from lmcflow.plan.rulefiles import read_rules

    rules = read_rules()
    plan = load_plan(None)
    jobs = rule_jobs(plan)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    for f in ("model-0.safetensors", "model-1.safetensors", "model-2.pt"):
        (tmp_path / "checkpoints" / f).write_bytes(b"x")
    jobs += rule_jobs(load_plan(str(REPO / "examples/imported/config.yaml")))
    assert set(rules) == {j.rule for j in jobs}
    constant = re.compile(r'^(config\["\w+"\]|lambda wc: wc\.\w+|f?"[^"]*"|[A-Z_]+)$')
    of_plan = re.compile(r"^PLAN\.(\w+)\.(\w+)(\((.*)\))?$")
    for rule in rules.values():
        var = rule.loop[0] if rule.loop else None
        for name, expr in rule.params.items():
            m = of_plan.match(expr)
            # PLAN.<part>.<function>, PLAN.<part>.<function>(...) (its args constants or the loop's value), or
            # PLAN.<part>.<datum>: a value the plan holds from the config (its studies), the counterpart of a constant
            target = getattr(getattr(plan, m[1], None), m[2], None) if m else None
            plan_function = m and callable(target) and (m[4] is None or m[4] in ("", var) or bool(constant.match(m[4])))
            plan_datum = m and m[3] is None and target is not None and not callable(target)
            assert (var and expr == var) or constant.match(expr) or plan_function or plan_datum, \
                f"rule {rule.name}: {name}={expr}"
        if rule.name != "all":
            assert rule.script and rule.script.is_file(), rule.name
