"""The docs say what the code computes: the README's verdict table is the cited run's, job counts, claim counts
and seeds match the shipped configs, every config key and every table column is documented exactly once."""
import functools
import json
import re
from pathlib import Path

import pytest

from lmcflow.claims import REGISTRY
from lmcflow.cli import claims_markdown
from lmcflow.config import resolve_config
from lmcflow.config.schema import load_schema
from lmcflow.plan import job_counts
from lmcflow.tables import IDENT_POINT_COLUMNS, IDENT_TABLE_KINDS, POINT_COLUMNS, TABLES
from lmcflow.verify import verify

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
EVIDENCE = REPO / "evidence/cpu-default/results"
CONFIGS = sorted(p.name for p in (REPO / "config").glob("*.yaml"))
DOCS = [README, REPO / "config/README.md", REPO / "results/README.md", *sorted((REPO / "docs").glob("*.md"))]


# ----------------------------------------------------------------------------------------------- README
def test_readme_is_a_landing_page():
    assert len(README.read_text().splitlines()) <= 150


def test_readme_verdict_table_is_the_cited_runs():
    text = README.read_text()
    match = re.search(r"<!-- verdicts: lmcflow claims --markdown (\S+) -->\n(.*?)\n<!-- /verdicts -->", text, re.S)
    assert match, "README has no verdict table between its markers"
    assert REPO / match.group(1) == EVIDENCE
    assert match.group(2) == claims_markdown(EVIDENCE), (
        "README's verdict table is not `lmcflow claims --markdown evidence/cpu-default/results`; regenerate it")
    assert len(list((EVIDENCE / "claims").glob("*.json"))) == len(REGISTRY)


def test_the_cited_run_verifies_as_published():
    v = verify(EVIDENCE, published=True)
    assert v.ok, "\n".join(map(str, v.problems))
    assert v.checked["claims"] == len(REGISTRY) and v.checked["tables"] > len(REGISTRY)


def test_claims_markdown_from_the_command_line(capsys, tmp_path):
    from lmcflow.cli import main

    assert main(["claims", "--markdown", str(EVIDENCE)]) == 0
    assert capsys.readouterr().out == claims_markdown(EVIDENCE) + "\n"
    # a claim without an interval, a "|" in its text, a paper value without our estimate of it
    claim = json.loads((EVIDENCE / "claims/lewc.json").read_text())
    claim.update(statistic_name="a | b", ci_low=None, ci_high=None, reason="too few seeds",
                 paper_values=[{"quantity": "q", "value": 0.5, "scale": "MLP", "fits_our_study": False, "ours": None}])
    claim.pop("replication")  # a run without replicate seeds: no replicate column
    claim.update(regime=None, decided_by_convention=None)  # neither a regime label nor a margin in the cell
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims/lewc.json").write_text(json.dumps(claim))
    row = claims_markdown(tmp_path).splitlines()[2]
    assert row == (f"| `lewc` | Ito et al. | {claim['verdict']} | a \\| b: {claim['statistic']:.3g} (too few seeds) | "
                   "q: 0.5 (MLP) |")


# ----------------------------------------------------------------------------------------------- numbers
def _number(text: str) -> int:
    return int(text.replace(",", ""))


@functools.cache
def planned_job_count(config: str) -> dict[str, int]:
    """Jobs per rule and ``total`` that a run of ``config/<config>`` plans on a fresh directory (``lmcflow.plan``;
    ``tests/test_plan.py`` checks these counts against ``snakemake -n``)."""
    return job_counts(REPO / "config" / config)


def _config_facts(config: str) -> dict:
    cfg = resolve_config([str(REPO / "config" / config)])
    return {"claims": len(cfg["claims"]), "seeds": {s: len(st["seeds"]) for s, st in cfg["studies"].items()}}


def _mentions(pattern: str):
    """(doc, line, config, match) for every match of ``pattern`` after a config name in the same paragraph (or
    table row): the config named last before it."""
    for doc in DOCS:
        text = doc.read_text()
        chunks = re.split(r"\n\s*\n|\n(?=\||\s*[*-] )", text)
        for line in (" ".join(chunk.split()) for chunk in chunks):
            configs = list(re.finditer(r"(?:config/)?(\w+\.yaml)", line))
            for m in re.finditer(pattern, line):
                before = [c.group(1) for c in configs if c.start() < m.start() and c.group(1) in CONFIGS]
                if before:
                    yield doc.relative_to(REPO), line, before[-1], m


def test_job_counts_in_the_docs_are_what_snakemake_plans():
    checked = set()
    for doc, line, config, m in _mentions(r"(?<![\w-])(\d[\d,]*) (?:(\w+) )?jobs\b"):
        counts = planned_job_count(config)
        rule = m.group(2)
        if rule is None:
            expected = counts["total"]
        elif rule in counts:
            expected = counts[rule]
        else:  # "N compute jobs", "N torch jobs": not a rule of the job stats
            continue
        assert _number(m.group(1)) == expected, f"{doc}: {config} plans {expected} {rule or ''} jobs: {line}"
        checked.add(config)
    assert checked == set(CONFIGS), f"docs give no job count for {set(CONFIGS) - checked}"


def test_paper_scale_gpu_hours_are_what_the_plan_estimates():
    """docs/paper-scale.md's "Expected GPU-hours": each figure is ``lmcflow plan``'s, as it prints it."""
    from lmcflow.plan import load_plan
    from lmcflow.plan.summary import _h, planned_jobs, rule_rows

    text = " ".join((REPO / "docs/paper-scale.md").read_text().split())
    for config, rules in {"config/paper_width.yaml": ("train", "interpolate", "align", "mechanism", "merge_many"),
                          "config/paper_identifiability.yaml": ("train",)}.items():
        rows = {r["rule"]: r for r in rule_rows(planned_jobs(load_plan(REPO / config)), None)}
        total = _h(sum(r["gpu_h_estimated"] for r in rows.values()))
        requested = _h(sum(r["gpu_h_requested"] for r in rows.values()))
        parts = ", ".join(f"{name} {_h(rows[rule]['gpu_h_estimated'])}" for rule, name in
                          zip(rules, ("train", "λ paths", "alignment", "mechanism", "merge_many")))
        assert f"{total} " in text and f"`{Path(config).name}` ({parts})" in text and requested in text, \
            f"docs/paper-scale.md: {config} plans {total} GPU-h ({parts}), requested {requested}"


def test_claim_counts_in_the_docs_are_the_configs():
    checked = set()
    for doc, line, config, m in _mentions(r"(?<![\w-])(\d+) claims\b"):
        assert int(m.group(1)) == _config_facts(config)["claims"], f"{doc}: {line}"
        checked.add(config)
    assert checked == set(CONFIGS)


def test_seeds_per_study_in_the_shipped_configs_table():
    text = (REPO / "docs/usage.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `config/(\w+\.yaml)` \|.*\| ([^|]*) \|$", text, re.M)}
    assert set(rows) == set(CONFIGS)
    for config, cell in rows.items():
        usual = int(re.match(r"(\d+)", cell).group(1))
        named = {s: int(n) for s, n in re.findall(r"`(\w+)`: (\d+)", cell)}
        seeds = _config_facts(config)["seeds"]
        assert set(named) <= set(seeds), f"{config}: no study {set(named) - set(seeds)}"
        assert {s: named.get(s, usual) for s in seeds} == seeds, f"docs/usage.md, {config}: {cell}"


def test_every_registered_claim_has_its_parameters_documented():
    text = (REPO / "config/README.md").read_text()
    section = text.split("### Claim parameters and criteria", 1)[1]
    documented = re.findall(r"^\| `([\w-]+)` \|", section, re.M)
    assert sorted(documented) == sorted(REGISTRY), "config/README.md's claim table and the registry differ"


# ----------------------------------------------------------------------------------------------- sections
def _sections(path: Path) -> list[tuple[str, str]]:
    """(heading, body) of every ## … #### section."""
    parts = re.split(r"^(#{2,4} .*)$", path.read_text(), flags=re.M)
    return [(parts[i].lstrip("#").strip(), parts[i + 1]) for i in range(1, len(parts), 2)]


def _first_cells(body: str, header: str) -> list[set[str]]:
    """Per table row (of the tables whose first header cell is ``header``), the backticked names in the first cell,
    with ``a_{x,y}`` expanded."""
    rows, in_table = [], False
    for line in body.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        first = line.split("|")[1].strip()
        if not in_table:
            in_table, keep = True, first == header
            continue
        if keep and not set(first) <= set("-: "):
            names = set()
            for name in re.findall(r"`([\w{},<>.]+)`", first):
                brace = re.fullmatch(r"(\w*)\{([\w,]+)\}(\w*)", name)
                names |= {brace[1] + x + brace[3] for x in brace[2].split(",")} if brace else {name}
            rows.append(names)
    return rows


def test_no_duplicate_headings():
    for doc in DOCS:
        headings = [h for h, _ in _sections(doc)]
        assert len(headings) == len(set(headings)), f"{doc}: {[h for h in headings if headings.count(h) > 1]}"


# ----------------------------------------------------------------------------------------------- config keys
DISPLAY = {"symmetry": "model.symmetry", "synthetic_dataset": "data.synthetic.<name>"}
PLACEHOLDER = {"claims": "<id>"}


def schema_sections() -> dict[str, set[str]]:
    """Every object of the config schema that has keys, named as config/README.md heads its section."""
    root = load_schema()
    out: dict[str, set[str]] = {}

    def visit(name: str, sub: dict) -> None:
        if name in out:
            return
        if sub.get("properties"):
            out[name] = set(sub["properties"])
        for key, child in (sub.get("properties") or {}).items():
            child_of(name, key, child)
        for variant in sub.get("allOf", []):
            props = variant["then"]["properties"]
            out[f"generator: {props['generator']['const']}"] = set(props)

    def child_of(parent: str, key: str, child: dict) -> None:
        if "$ref" in child:
            ref = child["$ref"].rsplit("/", 1)[-1]
            visit(DISPLAY.get(ref, ref), root["$defs"][ref])
            return
        path = key if parent == "Top level" else f"{parent}.{key}"
        if child.get("properties"):
            visit(path, child)
        if isinstance(child.get("additionalProperties"), dict):
            child_of(path, PLACEHOLDER.get(key, "<name>"), child["additionalProperties"])

    visit("Top level", root)
    return out


def documented_sections() -> dict[str, set[str]]:
    out = {}
    for heading, body in _sections(REPO / "config/README.md"):
        name = heading if heading == "Top level" else (re.match(r"`([^`]+)`", heading) or [None, None])[1]
        if name is not None:
            out[name] = set().union(*_first_cells(body, "key")) if _first_cells(body, "key") else set()
    return out


def test_config_readme_documents_every_schema_key_and_no_other():
    schema, documented = schema_sections(), documented_sections()
    assert set(documented) == set(schema), (
        f"sections without schema object: {set(documented) - set(schema)}; "
        f"schema objects without section: {set(schema) - set(documented)}")
    for name, keys in schema.items():
        assert documented[name] == keys, (
            f"config/README.md, `{name}`: undocumented {keys - documented[name]}, "
            f"not in the schema {documented[name] - keys}")


# ----------------------------------------------------------------------------------------------- table columns
def documented_columns() -> dict[str, set[str]]:
    sections = dict(_sections(REPO / "results/README.md"))
    point = set().union(*_first_cells(sections[next(h for h in sections if h.startswith("Point columns"))],
                                      "column"))
    ident = point | set().union(*_first_cells(sections["Identifiability paper tables"], "column"))
    out = {}
    for heading, body in sections.items():
        kind = re.match(r"`(\w+)\.parquet`", heading)
        if kind:
            kind = kind[1]
            base = set() if kind in ("claims", "paper_table1") else ident if kind in IDENT_TABLE_KINDS else point
            out[kind] = base | set().union(set(), *_first_cells(body, "column"))
    return out


def test_results_readme_documents_every_declared_column_and_no_other():
    assert {c for c, _ in POINT_COLUMNS} < {c for c, _ in IDENT_POINT_COLUMNS}
    documented = documented_columns()
    assert set(documented) == set(TABLES), (
        f"documented tables not declared: {set(documented) - set(TABLES)}; "
        f"undocumented: {set(TABLES) - set(documented)}")
    for kind, columns in TABLES.items():
        declared = {c for c, _ in columns}
        assert documented[kind] == declared, (
            f"results/README.md, `{kind}.parquet`: undocumented {declared - documented[kind]}, "
            f"not declared in lmcflow/tables.py {documented[kind] - declared}")


# ----------------------------------------------------------------------------------------------- names
def test_code_the_docs_name_exists():
    import importlib

    for doc in DOCS:
        text = doc.read_text()
        for name in set(re.findall(r"`(lmcflow(?:\.\w+)+)", text)):
            parts = name.split(".")
            for i in range(len(parts), 0, -1):  # the longest importable module, then attributes
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ModuleNotFoundError:
                    continue
                for attr in parts[i:]:
                    assert hasattr(obj, attr), f"{doc.relative_to(REPO)} names {name}, which does not exist"
                    obj = getattr(obj, attr)
                break
        for path in set(re.findall(r"`((?:lmcflow|tests|benchmarks|workflow|config|profiles)/[\w./-]*\w)`", text)):
            assert (REPO / path).exists(), f"{doc.relative_to(REPO)} names {path}, which does not exist"


# ----------------------------------------------------------------------------------------------- history
HISTORY = re.compile(r"before bundling|earlier run|the run before|old setup|old default|\(now |\bnow a\b|"
                     r"\bno longer\b|\bformer(ly)?\b|\bwas \d|in issue \d+|when `?\w+`? still", re.I)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_docs_state_what_is_not_what_was(doc):
    hits = [line for line in doc.read_text().splitlines() if HISTORY.search(line)]
    assert not hits, f"{doc.relative_to(REPO)}: history belongs in CHANGELOG.md: {hits}"


def _schema_defaults() -> dict[str, dict]:
    """Per config/README.md section, the schema ``default:`` of each key that has one."""
    root = load_schema()
    defs = {DISPLAY.get(k, k): v for k, v in root["$defs"].items()}
    out = {}
    for name in schema_sections():
        if name.startswith("generator: "):  # the generators' defaults live in lmcflow/synthetic.py
            out[name] = {}
            continue
        sub = root if name == "Top level" else defs.get(name)
        if sub is None:  # an inline object: walk the dotted path from the root or from its $def
            head, *rest = name.split(".")
            sub = defs.get(head) or root["properties"][head]
            for key in rest:
                sub = (sub.get("properties") or {}).get(key) or sub.get("additionalProperties") or {}
        props = {k: defs.get(v["$ref"].rsplit("/", 1)[-1], {}) | v if "$ref" in v else v
                 for k, v in (sub.get("properties") or {}).items()}
        out[name] = {k: v["default"] for k, v in props.items() if "default" in v}
    return out


def test_config_readme_defaults_are_the_schemas():
    import yaml

    defaults, compared = _schema_defaults(), 0
    for heading, body in _sections(REPO / "config/README.md"):
        name = heading if heading == "Top level" else (re.match(r"`([^`]+)`", heading) or [None, None])[1]
        for line in body.splitlines():
            cells = [c.strip() for c in line.split("|")[1:-1]]
            if name not in defaults or len(cells) != 3 or not cells[0].startswith("`"):
                continue
            keys = re.findall(r"`(\w+)`", cells[0])
            values = [v.strip("`") for v in cells[1].split(", ")]
            if len(values) != len(keys) or not cells[1]:
                continue
            for key, text in zip(keys, values, strict=True):
                try:
                    value = yaml.safe_load(text)
                except yaml.YAMLError:
                    continue
                if key in defaults[name] and isinstance(value, type(defaults[name][key]) | int | float | None):
                    assert value == defaults[name][key], (
                        f"config/README.md, `{name}`: `{key}` documented default {text}, "
                        f"schema default {defaults[name][key]!r}")
                    compared += 1
    assert compared >= 60, f"only {compared} documented defaults compared"


def test_every_marked_verdict_table_in_the_docs_is_generated_from_its_run(tmp_path):
    """docs/claims.md's table of the regime run (and any other marked table outside the README) is what
    `lmcflow claims --update-doc` writes: the run's claims_markdown, or the not-yet-run line."""
    from lmcflow.cli import VERDICT_BLOCK, update_doc_tables, verdict_table

    blocks = [(doc, m) for doc in DOCS if doc != README for m in VERDICT_BLOCK.finditer(doc.read_text())]
    assert any(m.group(2) == "evidence/cpu_regime/results" for _, m in blocks)
    for doc, m in blocks:
        assert m.group(3) == verdict_table(REPO, m.group(2)), f"{doc}: run `lmcflow claims --update-doc {doc}`"
    # the same mechanism fills a block once the run exists
    doc = tmp_path / "doc.md"
    doc.write_text("x\n<!-- verdicts: lmcflow claims --markdown evidence/cpu-default/results -->\nSTALE TABLE\n"
                   "<!-- /verdicts -->\n")
    assert update_doc_tables(doc, REPO)
    assert claims_markdown(EVIDENCE) in doc.read_text() and "STALE TABLE" not in doc.read_text()


def test_every_marked_null_partner_table_in_the_docs_is_generated_from_its_run(tmp_path):
    """docs/claims.md's real-vs-null tables are `lmcflow claims --nulls-markdown` of the run they name, and
    `--update-doc` rewrites a stale one."""
    from lmcflow.doc_tables import NULLS_BLOCK, nulls_markdown, nulls_table, update_doc_tables

    blocks = [(doc, m) for doc in DOCS for m in NULLS_BLOCK.finditer(doc.read_text())]
    assert {m.group(2) for _, m in blocks} >= {"evidence/cpu_regime/results", "evidence/cpu-default/results"}
    for doc, m in blocks:
        assert m.group(3) == nulls_table(REPO, m.group(2)), f"{doc}: run `lmcflow claims --update-doc {doc}`"
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- nulls: lmcflow claims --nulls-markdown evidence/cpu-default/results -->\nSTALE\n"
                   "<!-- /nulls -->\n")
    assert update_doc_tables(doc, REPO)
    assert nulls_markdown(EVIDENCE) in doc.read_text() and "STALE" not in doc.read_text()


def test_every_marked_training_table_in_the_docs_is_generated_from_its_run(tmp_path):
    """docs/claims.md's table of the regime run's trained models is `lmcflow claims --training-markdown` of it."""
    import pandas as pd

    from lmcflow.doc_tables import TRAINING_BLOCK, training_markdown, training_table, update_doc_tables

    blocks = [(doc, m) for doc in DOCS for m in TRAINING_BLOCK.finditer(doc.read_text())]
    assert {m.group(2) for _, m in blocks} >= {"evidence/cpu_regime/results"}
    for doc, m in blocks:
        assert m.group(3) == training_table(REPO, m.group(2)), f"{doc}: run `lmcflow claims --update-doc {doc}`"
    lines = training_markdown(EVIDENCE).splitlines()
    runs = pd.read_parquet(EVIDENCE / "tables/runs.parquet")
    trained = runs[runs.epochs > 0]
    assert len(lines) == 2 + trained.groupby(["study", "dataset", "width", "weight_decay", "sigma_f", "partner"],
                                             dropna=False).ngroups
    assert sum(int(line.split("|")[7]) for line in lines[2:]) == len(trained)  # every trained model counted once
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- training: lmcflow claims --training-markdown evidence/cpu-default/results -->\nSTALE\n"
                   "<!-- /training -->\n")
    assert update_doc_tables(doc, REPO) and "STALE" not in doc.read_text()


def test_the_null_partner_table_shows_each_kind_against_the_headline_criterion(tmp_path):
    """One row per claim with null controls: the headline criterion, the real estimate and per kind the null's
    estimate, the headline criterion's verdict on it (flagged where a useless partner passes) and the control's
    verdict; a kind the run has no rows for is "not run" with its reason, a kind it did not make "—"."""
    from lmcflow.doc_tables import nulls_markdown

    head = {"name": "cos_widest", "kind": "part", "side": ">", "threshold": 0.9, "statistic": 0.96, "ci_low": 0.95,
            "ci_high": 0.97, "verdict": "supported"}
    est = {"statistic": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    claim = {"claim_id": "some-claim", "paper": "Ito et al.", "criteria": [head], "null_controls": [
        {"kind": "untrained", "status": "run", "null": est, "verdict": "supported",
         "null_verdict_on_criterion": "not_supported"},
        {"kind": "shuffled_labels", "status": "run", "null": {**est, "statistic": 0.99}, "verdict": "inconclusive",
         "null_verdict_on_criterion": "supported"},
        {"kind": "collapsed", "status": "not run", "reason": "no rows at the widest width"}]}
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims/some-claim.json").write_text(json.dumps(claim))
    (tmp_path / "claims/no-nulls.json").write_text(json.dumps({**claim, "claim_id": "no-nulls", "null_controls": []}))
    # a headline that is a control criterion (LEWC's): the row shows the criterion the null records name
    gain = {**head, "name": "gain_over_shuffled", "kind": "control", "statistic": 0.99}
    (tmp_path / "claims/control-head.json").write_text(json.dumps({
        **claim, "claim_id": "control-head", "criteria": [gain, head],
        "null_controls": [{**rec, "statistic_name": "gain_over_shuffled"} for rec in claim["null_controls"]]}))
    lines = nulls_markdown(tmp_path).splitlines()
    assert lines[0] == "| claim | headline criterion | real pairs | untrained | shuffled-labels | collapsed |"
    assert len(lines) == 4, "a claim without null controls has no row"
    assert lines[2].startswith("| `control-head` | `gain_over_shuffled` > 0.9 | 0.99 [0.95, 0.97]")
    cells = [c.strip() for c in lines[3].split("|")[1:-1]]
    assert cells[:3] == ["`some-claim`", "`cos_widest` > 0.9", "0.96 [0.95, 0.97] → supported"]
    assert cells[3] == "0.5 [0.4, 0.6] → not_supported (fails the headline); control: supported"
    assert cells[4] == "0.99 [0.4, 0.6] → supported (**passes the headline**); control: inconclusive"
    assert cells[5] == "not run (no rows at the widest width)"


# ----------------------------------------------------------------------------------------------- extending
EXTENDING = REPO / "docs/extending.md"
EXTENSIONS = ("A new model family", "A new merge method", "A new claim", "A new study kind")


def extension_files(body: str) -> list[str]:
    """The files a worked extension touches: the backticked path that opens each of its ``- `` items."""
    return re.findall(r"^- `([\w./<>-]+)`", body, re.M)


def test_each_worked_extension_lists_files_that_exist():
    sections = dict(_sections(EXTENDING))
    assert set(EXTENSIONS) <= set(sections), f"docs/extending.md lacks {set(EXTENSIONS) - set(sections)}"
    for name in EXTENSIONS:
        files = extension_files(sections[name])
        assert files, f"docs/extending.md, {name}: no file list"
        for path in files:
            new = "<" in path  # a file the extension adds: its folder must exist
            target = (REPO / path).parent if new else REPO / path
            assert target.exists(), f"docs/extending.md, {name}: {path} does not exist"
    for name in ("A new merge method", "A new claim"):
        assert len(extension_files(sections[name])) <= 4, f"docs/extending.md, {name}: more than four files"


def test_extension_file_lists_are_read_from_the_items():
    body = "- `lmcflow/models.py`: the module\n- `lmcflow/jobs/<name>.py`: new\n  - `not/a/top/item.py`\nprose `x.py`"
    assert extension_files(body) == ["lmcflow/models.py", "lmcflow/jobs/<name>.py"]
