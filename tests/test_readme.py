"""The README's trace of one claim (`lewc`) agrees with `lmcflow trace lewc`: every file, rule and function it
names exists, and each rule sits in the rule file the generated trace gives for it."""
import importlib
import re
from pathlib import Path

from lmcflow.plan.trace import trace

REPO = Path(__file__).resolve().parents[1]


def trace_section() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("### Following one claim through the code")
    end = text.index("\n#", start + 10)
    return text[start:end]


def test_files_rules_and_functions_of_the_claim_trace_exist():
    section = trace_section()
    generated = trace("lewc")
    files = set(re.findall(r"`([\w/.-]+\.(?:py|smk))`", section))
    for f in files:
        assert (REPO / f).is_file(), f"README names {f}, which does not exist"
    rule_files = dict(re.findall(r"^  (\w+)\s+(workflow/rules/\w+\.smk):\d+ ", generated, re.M))
    rules = re.findall(r"rule\s+`(\w+)`[^`]*?`(workflow/rules/\w+\.smk)`", section)
    assert {r for r, _ in rules} >= {"claim", "study_table", "mechanism"}
    for rule, smk in rules:
        assert rule_files.get(rule) == smk, f"README puts rule {rule} in {smk}; lmcflow trace: {rule_files.get(rule)}"
    dotted = set(re.findall(r"`(lmcflow(?:\.\w+)+)`", section))
    assert "lmcflow.mechanism.lewc_rows" in dotted
    for name in dotted:
        module, _, attr = name.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), f"README names {name}, which does not exist"
    statistic = re.search(r"^statistic: \S+  ([\w/.]+\.py):\d+$", generated, re.M)[1]
    assert f"`{statistic}`" in section, f"README does not name {statistic}, where lmcflow trace finds the statistic"
