"""The package's layers: no import cycle among lmcflow modules, no function-local import except of an optional
heavy dependency, no module over 400 lines."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lmcflow"
MAX_LINES = 400
# imported inside functions so that torch-free or quick paths (table, claim and config jobs) skip their cost
HEAVY = {"torch", "torchvision", "scipy", "matplotlib", "seaborn", "jsonschema", "safetensors", "pandas", "pyarrow"}
# lmcflow modules that are torch at import (subclasses of torch's own classes), imported inside a function of a
# torch-free module only where torch is imported there too: the config check's probe of an external model
TORCH_AT_IMPORT = {"lmcflow.random_ops"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, ast.stmt, bool]]:
    """(imported module, import statement, function-local) of every import the module runs; imports under
    ``if TYPE_CHECKING:`` never run and are left out. ``from a import b`` names module ``a.b`` when that is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(ast.Module(body=[sub], type_ignores=[]), local)
                continue
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, child, local) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module
                subs = [f"{mod}.{a.name}" for a in child.names if f"{mod}.{a.name}" in known]
                found.extend((m, child, local) for m in (subs or [mod]))
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found


def top_level_graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: {m for m, _, local in imports(name, path, set(mods)) if not local and m in mods}
            for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (``[a, b, ..., a]``) of ``graph``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := dfs(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := dfs(node)):
            return cycle
    return None


def test_no_import_cycle_among_lmcflow_modules():
    cycle = find_cycle(top_level_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_find_cycle_reports_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_function_local_imports_are_only_of_heavy_optional_dependencies():
    mods = modules()
    bad = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {m}"
           for name, path in mods.items() for m, node, local in imports(name, path, set(mods))
           if local and m not in TORCH_AT_IMPORT and (m.split(".")[0] == "lmcflow" or m.split(".")[0] not in HEAVY)]
    assert not bad, "function-local imports (move them to the top of the module):\n" + "\n".join(bad)


def test_every_function_local_import_says_why():
    """A comment on the import (or the line above it) says what the lazy import saves, and for whom."""
    mods = modules()
    silent = []
    for name, path in mods.items():
        lines = path.read_text().splitlines()
        for m, node, local in imports(name, path, set(mods)):
            if local and not any("#" in line for line in lines[node.lineno - 2: node.end_lineno]):
                silent.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {m}")
    assert not silent, "function-local imports without a comment saying why:\n" + "\n".join(silent)


def test_no_module_over_400_lines():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by what they are for): {long}"


def reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (top-level imports only)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def lmcflow_imports(name: str) -> set[str]:
    """The lmcflow modules ``name`` imports, top-level or function-local."""
    mods = modules()
    return {m for m, _, _ in imports(name, mods[name], set(mods)) if m in mods and m != "lmcflow"}


# The ground floor: modules every layer may use, which themselves import nothing of lmcflow.
GROUND_FLOOR = ("lmcflow.errors", "lmcflow.evaluation")
# Training and its state file sit above evaluation, beside merging: the merge, REPAIR and mechanism code
# evaluates models but never trains one.
TRAINING = {"lmcflow.training", "lmcflow.train_state", "lmcflow.bundle_training", "lmcflow.stacked_model"}
EVALUATING = ("lmcflow.merging", "lmcflow.repair", "lmcflow.merge_many", "lmcflow.mechanism")


def test_the_ground_floor_imports_nothing_of_lmcflow():
    for name in GROUND_FLOOR:
        assert not lmcflow_imports(name), f"{name} imports {sorted(lmcflow_imports(name))}"


def test_evaluation_sits_below_merging_and_training():
    graph = top_level_graph()
    for name in ("lmcflow.training", "lmcflow.merging", "lmcflow.merge_many", "lmcflow.repair",
                 "lmcflow.mechanism.common"):
        assert "lmcflow.evaluation" in reaches(graph, name), f"{name} does not build on lmcflow.evaluation"
    assert not reaches(graph, "lmcflow.evaluation") & (TRAINING | {"lmcflow.merging"})


def test_merging_repair_and_mechanism_import_nothing_of_training():
    graph = top_level_graph()
    mods = modules()
    bad = {}
    for name in mods:
        if name.startswith(EVALUATING) and (hit := (reaches(graph, name) | lmcflow_imports(name)) & TRAINING):
            bad[name] = sorted(hit)
    assert not bad, f"merging, REPAIR and mechanism modules reach training code: {bad}"


def test_no_job_module_imports_another():
    """One module per workflow stage: what two jobs share lives below ``lmcflow.jobs`` (``lmcflow.checkpoints``,
    ``lmcflow.alignment.storage``), never in a sibling job module."""
    bad = {name: sorted(hit) for name in modules() if name.startswith("lmcflow.jobs.")
           if (hit := {m for m in lmcflow_imports(name) if m.startswith("lmcflow.jobs")})}
    assert not bad, f"job modules import job modules: {bad}"


def test_the_layer_checks_see_a_violation():
    """The checks above read the real graph; this shows ``reaches`` finds an import two hops away."""
    assert reaches({"a": {"b"}, "b": {"c"}, "c": set()}, "a") == {"b", "c"}
    assert "lmcflow.evaluation" in lmcflow_imports("lmcflow.training")
