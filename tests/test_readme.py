"""The README's trace of one claim (`lewc`) from verdict to the rule that feeds it names what exists."""
import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def trace_section() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("### Following one claim through the code")
    end = text.index("\n#", start + 10)
    return text[start:end]


def test_files_rules_and_functions_of_the_claim_trace_exist():
    section = trace_section()
    files = set(re.findall(r"`([\w/.-]+\.(?:py|smk))`", section))
    assert {"lmcflow/claims/width.py", "workflow/rules/metrics.smk", "workflow/scripts/mechanism.py"} <= files
    for f in files:
        assert (REPO / f).is_file(), f"README names {f}, which does not exist"
    rules = re.findall(r"rule\s+`(\w+)`[^`]*?`(workflow/rules/\w+\.smk)`", section)
    assert {r for r, _ in rules} >= {"claim", "study_table", "mechanism"}
    for rule, smk in rules:
        assert re.search(rf"^rule {rule}:", (REPO / smk).read_text(), re.M), f"no rule {rule} in {smk}"
    dotted = set(re.findall(r"`(lmcflow(?:\.\w+)+)`", section))
    assert "lmcflow.mechanism.lewc_rows" in dotted
    for name in dotted:
        module, _, attr = name.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), f"README names {name}, which does not exist"
    assert re.search(r"^def lewc\(", (REPO / "lmcflow/claims/width.py").read_text(), re.M)
