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
# a rule, named (``rule NAME:``) or, inside a ``for`` loop, named by its ``name:`` f-string
RULE_RE = re.compile(r"^( *)rule(?: (\w+))?:$", re.M)
LOOP_RE = re.compile(r"^for (\w+) in (\w+):$", re.M)


@dataclass
class RuleText:
    name: str
    smk: Path
    line: int
    script: Path | None = None
    params: dict = field(default_factory=dict)  # param name -> its expression's text
    input: dict = field(default_factory=dict)  # input name ("" unnamed, "*" an unpack) -> its expression's text
    resources: dict = field(default_factory=dict)  # resource name -> its expression's text
    loop: tuple[str, str] | None = None  # (variable, its value) of the loop that defines the rule

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
    """Every rule of the Snakefile and ``workflow/rules/*.smk``: where it is, its script and its params entries;
    a rule defined in ``for VAR in NAME:`` (NAME from lmcflow.plan) once for each value, named by its ``name:``."""
    rules = {}
    for smk in [root / "Snakefile", *sorted((root / "workflow/rules").glob("*.smk"))]:
        text = smk.read_text()
        lines = text.splitlines()
        for m in RULE_RE.finditer(text):
            first = text.count("\n", 0, m.start())
            indent = len(m.group(1))
            block = [m.group(0)]
            for line in lines[first + 1:]:
                if line.strip() and len(line) - len(line.lstrip()) <= indent:
                    break
                block.append(line)
            r = _rule_text(m.group(2) or "", smk, first + 1, block, indent)
            if m.group(2):
                rules[r.name] = r
                continue
            var, values = _loop(text[:m.start()], smk)
            for value in values:
                name = ast.literal_eval(r.name.removeprefix("f")).replace("{" + var + "}", str(value))
                rules[name] = _rule_text(name, smk, first + 1, block, indent, (var, value))
    return rules


def _rule_text(name, smk, line, block, indent, loop=None) -> RuleText:
    """One rule's text: its script, input and params entries (and, unnamed, its ``name:`` expression as its
    name)."""
    r = RuleText(name, smk, line, loop=loop)
    section_re = re.compile(rf"^ {{{indent + 4}}}(\w+):")
    entry_re = re.compile(rf"^ {{{indent + 8}}}(\w+)=(.+?),?$")
    positional_re = re.compile(rf"^ {{{indent + 8}}}([^\s#].*?),?$")
    section = None
    for j, line_text in enumerate(block[1:], 1):
        if m := section_re.match(line_text):
            section = m.group(1)
            if section == "script":
                r.script = (smk.parent / ast.literal_eval(block[j + 1].strip())).resolve()
            elif section == "name" and not name:
                r.name = block[j + 1].strip()
        elif section == "params" and (m := entry_re.match(line_text)):
            r.params[m.group(1)] = m.group(2)
        elif section == "resources" and (m := entry_re.match(line_text)):
            r.resources[m.group(1)] = m.group(2)
        elif section == "input" and (m := entry_re.match(line_text)):
            r.input[m.group(1)] = m.group(2)
        elif section == "input" and (m := positional_re.match(line_text)):
            r.input["*" if m.group(1).startswith("unpack(") else ""] = m.group(1)
    return r


def _loop(before: str, smk: Path) -> tuple[str, list]:
    """(variable, values) of the ``for`` loop that the text before an unnamed rule ends inside."""
    loops = list(LOOP_RE.finditer(before))
    if not loops:
        raise ValueError(f"{rel(smk)}: an unnamed rule outside a for loop")
    var, iterable = loops[-1].groups()
    return var, list(getattr(importlib.import_module("lmcflow.plan"), iterable))


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
