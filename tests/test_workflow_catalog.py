"""The field's conventions for a shared workflow: the Snakemake Workflow Catalog's usage file, a config schema whose
every key carries the description its parameter table shows, and `snakedeploy deploy-workflow` against a tag
(a local clone as the source: no network)."""
from __future__ import annotations

import filecmp
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lmcflow.config.schema import load_schema

REPO = Path(__file__).resolve().parents[1]


def test_catalog_usage_file_says_how_to_run_the_workflow():
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment", "report"}
    assert usage["report"] is True  # `snakemake --report` works (rule files carry report captions)
    assert "--configfile" in usage["mandatory-flags"]["desc"]
    # a pip environment, not conda or a container: say so rather than claim a deployment the rules lack
    assert set(usage["software-stack-deployment"].values()) == {False}


def properties(node, path=""):
    """(dotted path, schema) of every property of the config schema, conditions of ``if`` left out."""
    if isinstance(node, dict):
        for key, sub in (node.get("properties") or {}).items():
            yield f"{path}.{key}".lstrip("."), sub
        for key, sub in node.items():
            if key != "if":
                yield from properties(sub, f"{path}.{key}" if key not in ("properties",) else path)
    elif isinstance(node, list):
        for sub in node:
            yield from properties(sub, path)


def test_every_schema_property_has_a_description():
    props = list(properties(load_schema()))
    assert len(props) > 150
    missing = sorted({p for p, sub in props if isinstance(sub, dict) and not str(sub.get("description", "")).strip()})
    assert missing == []


@pytest.mark.slow
def test_snakedeploy_deploys_a_tag_of_a_local_clone(tmp_path):
    """`snakedeploy deploy-workflow SOURCE DEST --tag TAG` with SOURCE a local clone (its path names the GitHub
    owner and repository, as snakedeploy's GitHub provider reads them): DEST gets the tag's config and profiles and a
    Snakefile that uses every rule of the tagged workflow as a module."""
    snakedeploy = shutil.which("snakedeploy") or str(Path(sys.executable).with_name("snakedeploy"))
    src = tmp_path / "github.com/lmcflow-org/lmcflow"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(src)], check=True)
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    subprocess.run(["git", "-C", str(src), "tag", "v-deploy-test"], check=True)
    subprocess.run(["git", "-C", str(src), "commit", "--quiet", "--allow-empty", "-m", "after the tag"], check=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})
    dest = tmp_path / "deployed"
    res = subprocess.run([snakedeploy, "deploy-workflow", str(src), str(dest), "--tag", "v-deploy-test"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    snakefile = (dest / "workflow/Snakefile").read_text()
    assert re.search(r'github\("lmcflow-org/lmcflow", path="Snakefile", tag="v-deploy-test"\)', snakefile), snakefile
    assert 'configfile: "config/config.yaml"' in snakefile and "use rule * from lmcflow" in snakefile
    tagged = tmp_path / "tagged"
    subprocess.run(["git", "clone", "--quiet", "--branch", "v-deploy-test", str(src), str(tagged)], check=True)
    assert subprocess.run(["git", "-C", str(tagged), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout == head.stdout
    for folder in ("config", "profiles"):
        cmp = filecmp.dircmp(tagged / folder, dest / folder)
        assert not (cmp.left_only or cmp.right_only or cmp.diff_files), (folder, cmp.report())
    # The deployment runs the tagged workflow as a module, with the config it passes: here from the tagged clone's
    # files rather than GitHub (no network); a dry run plans the default run's jobs in the deployment's folder.
    (dest / "workflow/Snakefile").write_text(snakefile.replace(
        'github("lmcflow-org/lmcflow", path="Snakefile", tag="v-deploy-test")', f'"{tagged / "Snakefile"}"'))
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    res = subprocess.run([snakemake, "-n", "--cores", "1"], cwd=dest, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert re.search(r"^train\s+\d+$", res.stdout + res.stderr, re.M), res.stdout[-2000:]
    # A dry run writes nothing: no results/ in the deployment, and the tagged clone (whose results/README.md is
    # tracked) as it was checked out.
    assert not (dest / "results").exists()
    assert subprocess.run(["git", "-C", str(tagged), "status", "--porcelain", "--ignored"], capture_output=True,
                          text=True, check=True).stdout == ""
