"""The rule table (lmcflow.plan.ruletable) is the rule files' rules: the same names, the same ``input:`` and
``params:`` entries, the same script, and the job function that script calls; a rule with a typed payload
(lmcflow.payloads) passes params named as its TypedDict's keys, and its job function takes them by those names."""
import importlib
import inspect
import typing

import pytest

from lmcflow.plan.rulefiles import CHECKOUT, job_functions, read_rules
from lmcflow.plan.ruletable import RULES

SMK = read_rules()


def job_function(rule):
    module, name = rule.job.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def test_the_table_has_every_rule_of_the_rule_files_and_no_other():
    assert sorted(SMK) == sorted(RULES)


@pytest.mark.parametrize("name", sorted(RULES))
def test_a_rows_inputs_params_script_and_job_function_are_its_stanzas(name):
    rule, text = RULES[name], SMK[name]
    assert rule.input == text.input, f"rule {name}: input"
    assert rule.params == text.params, f"rule {name}: params"
    assert (CHECKOUT / "workflow/scripts" / rule.script if rule.script else None) == text.script, f"rule {name}: script"
    called = job_functions(text.script) if text.script else []
    assert called == ([job_function(rule)] if rule.job else []), f"rule {name}: {text.script} calls {called}"
    assert rule.loop == text.loop


@pytest.mark.parametrize("name", sorted(n for n, r in RULES.items() if r.payload))
def test_a_payload_has_one_name_on_both_sides(name):
    """The rule's params are its payload's keys, and its job function takes each of them, and its ``data`` input,
    by that name."""
    rule = RULES[name]
    keys = set(typing.get_type_hints(rule.payload))
    assert set(rule.params) == keys
    takes = set(inspect.signature(job_function(rule)).parameters)
    assert keys <= takes, keys - takes
    assert "data" not in rule.input or "data" in takes


def test_the_compute_rules_have_a_cost_and_nothing_else_has():
    from lmcflow.plan.requests import COMPUTE

    assert {n for n, r in RULES.items() if r.cost} == {c.name for c in COMPUTE}
    assert all(RULES[c.name].cost is c for c in COMPUTE)


@pytest.mark.parametrize("name", sorted(RULES))
def test_a_compute_rule_asks_for_its_own_request_and_no_other_rule_asks_the_plan(name):
    """A compute rule's ``resources:`` are ``PLAN.resources("<its name>", key)`` (its row's cost); no other rule
    names ``PLAN.resources``."""
    asked = {k: v for k, v in SMK[name].resources.items() if v.startswith("PLAN.resources(")}
    if RULES[name].cost:
        assert asked == {k: f'PLAN.resources("{name}", "{k}")' for k in ("mem_mb", "runtime", "gpu")}
    else:
        assert not asked
