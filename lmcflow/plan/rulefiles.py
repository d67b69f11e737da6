"""The rule files as data: each rule's file and line, its script, its params entries, and the lmcflow job
function its script calls (read from the ``workflow/rules/*.smk`` and ``workflow/scripts/*.py`` text)."""
from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
RULE_RE = re.compile(r"^rule (\w+):", re.M)
ENTRY_RE = re.compile(r"^        (\w+)=(.+?),?$")


@dataclass
class RuleText:
    name: str
    smk: Path
    line: int
    script: Path | None = None
    params: dict = field(default_factory=dict)  # param name -> its expression's text

    def where(self) -> str:
        return f"{rel(self.smk)}:{self.line}"


def rel(path: Path) -> str:
    """A path relative to the checkout (absolute when outside it)."""
    path = Path(path).resolve()
    return str(path.relative_to(CHECKOUT)) if path.is_relative_to(CHECKOUT) else str(path)


def def_line(fn) -> int:
    """The line of ``fn``'s ``def`` (after any decorators)."""
    lines, start = inspect.getsourcelines(fn)
    pattern = re.compile(rf"^\s*(async\s+)?def\s+{re.escape(fn.__name__)}\b")
    return start + next(i for i, line in enumerate(lines) if pattern.match(line))


def where_defined(fn) -> str:
    return f"{rel(inspect.getsourcefile(fn))}:{def_line(fn)}"


def read_rules(root: Path = CHECKOUT) -> dict[str, RuleText]:
    """Every rule of the Snakefile and ``workflow/rules/*.smk``: where it is, its script and its params entries."""
    rules = {}
    for smk in [root / "Snakefile", *sorted((root / "workflow/rules").glob("*.smk"))]:
        text = smk.read_text()
        starts = [(m.group(1), m.start()) for m in RULE_RE.finditer(text)]
        for i, (name, start) in enumerate(starts):
            block = text[start: starts[i + 1][1] if i + 1 < len(starts) else len(text)].splitlines()
            r = RuleText(name, smk, text.count("\n", 0, start) + 1)
            section = None
            for j, line in enumerate(block[1:], 1):
                if re.match(r"^    \w+:", line):
                    section = line.strip().split(":")[0]
                    if section == "script":
                        r.script = (smk.parent / ast.literal_eval(block[j + 1].strip())).resolve()
                elif section == "params" and (m := ENTRY_RE.match(line)):
                    r.params[m.group(1)] = m.group(2)
            rules[name] = r
    return rules


def job_functions(script: Path) -> list:
    """The lmcflow functions a job script calls to do its work (its ``run_*`` imports), as callables."""
    tree = ast.parse(Path(script).read_text())
    imported = {a.asname or a.name: (node.module, a.name) for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lmcflow") for a in node.names}
    called = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    out = []
    for name in dict.fromkeys(called):
        if name in imported and imported[name][1].startswith("run_"):
            module, attr = imported[name]
            out.append(getattr(importlib.import_module(module), attr))
    return out
