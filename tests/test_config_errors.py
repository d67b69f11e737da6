"""Every bad config gets lmcflow's own one-line error naming the file (line and column for bad YAML) or the
--config entry, from `lmcflow validate`, from `lmcflow run` before Snakemake parses anything, and from the
workflow itself; dotted --config keys are accepted and validated like every other value."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from snakemake.cli import parse_config

from lmcflow.cli import main, snakemake_value, split_config_args
from lmcflow.config import ConfigError, parse_overrides, resolve_config

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests/configs/tiny.yaml"
STUDY = "studies:\n  s: {dataset: fashion_mnist, seeds: [0, 1]}\n"
BAD_FILES = {
    "empty": ("", "{f}: empty config file; a config names at least one study under `studies:`"),
    "yaml-syntax": ("paths: {results: r\nstudies: [\n", "{f}:2:8: not valid YAML: expected ',' or '}}', but got ':'"),
    "tab-indent": (STUDY + "\tclaims: {}\n", "{f}:3:1: not valid YAML: found character '\\t' that cannot start any"),
    "unknown-top-level-key": (STUDY + "trian: {epochs: 3}\n", "{f}: unknown top-level key 'trian'; a config's keys "
                                                               "are paths, device,"),
    "not-a-mapping": ("- a\n- b\n", "{f}: expected a mapping of config keys, got a YAML list"),
}


def first_line(capsys) -> str:
    return capsys.readouterr().err.splitlines()[0]


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_config_file_gets_lmcflows_message(case, tmp_path, capsys):
    text, expect = BAD_FILES[case]
    f = tmp_path / "my.yaml"
    f.write_text(text)
    assert main(["validate", str(f)]) == 2
    assert first_line(capsys).startswith(f"lmcflow validate: {expect.format(f=f)}")
    assert main(["run", "-n", "--configfile", str(f)]) == 2  # before snakemake: it would say "not valid JSON or YAML"
    assert first_line(capsys).startswith(f"lmcflow run: {expect.format(f=f)}")


@pytest.mark.parametrize("entry,expect", [
    ("defaults.train.epochs=abc", "defaults.train.epochs: 'abc' is not of type 'integer'"),
    ("defaults.train.epochs", "--config defaults.train.epochs: expected KEY=VALUE with KEY a config key or a "
                              "dotted path to one, e.g. --config defaults.train.epochs=3"),
    ("defaults..epochs=3", "--config defaults..epochs=3: expected KEY=VALUE"),
    ("train.epochs=3", "--config train=…: unknown top-level key 'train'; a config's keys are paths,"),
])
def test_bad_override_gets_lmcflows_message(entry, expect, capsys):
    assert main(["validate", str(TINY), "--config", entry]) == 2
    assert expect in first_line(capsys)
    assert main(["run", "-n", "--configfile", str(TINY), "--config", entry]) == 2
    assert expect in first_line(capsys)


def test_dotted_overrides_reach_the_workflow_as_nested_keys():
    """What `lmcflow run` hands Snakemake parses (with Snakemake's own parser) into the same config."""
    files, entries, rest = split_config_args(["-n", "--configfile", str(TINY), "--config", "defaults.train.epochs=3",
                                              "defaults.train.weight_decay=1e-5", "device=cpu", "--cores", "1"])
    assert files == [str(TINY)] and rest == ["-n", "--cores", "1"]
    overrides = parse_overrides(entries)
    assert overrides == {"defaults": {"train": {"epochs": 3, "weight_decay": 1e-5}}, "device": "cpu"}
    snakemake_config = parse_config([f"{k}={snakemake_value(v)}" for k, v in overrides.items()])
    cfg = resolve_config(files, snakemake_config)
    assert cfg["defaults"]["train"]["epochs"] == 3 and cfg["defaults"]["train"]["weight_decay"] == 1e-5
    assert cfg["defaults"]["train"]["lr"] == 0.05  # the rest of the block stays the file's
    assert resolve_config(files, overrides) == cfg


def test_workflow_names_an_unknown_top_level_key(tmp_path):
    """A key Snakemake lets through reaches the workflow, which raises lmcflow's message."""
    f = tmp_path / "my.yaml"
    f.write_text(TINY.read_text() + "trian: {epochs: 3}\n")
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    res = subprocess.run([snakemake, "-n", "--snakefile", str(REPO / "Snakefile"),
                          "--directory", str(tmp_path), "--configfile", str(f), "--cores", "1"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode != 0
    assert f"Invalid config: {f}: unknown top-level key 'trian'" in res.stdout + res.stderr


def test_resolve_config_raises_config_error_not_yaml_error(tmp_path):
    f = tmp_path / "my.yaml"
    f.write_text("studies: [\n")
    with pytest.raises(ConfigError, match=rf"^{f}:2:1: not valid YAML"):
        resolve_config([f])


NON_FINITE = {
    "defaults.train.lr=.nan": "defaults.train.lr: nan is not a finite number",
    "defaults.train.lr=.inf": "defaults.train.lr: inf is not a finite number",
    "defaults.train.weight_decay=-.inf": "defaults.train.weight_decay: ",  # the schema's minimum catches -inf
    "studies.width.sweep={model.width: [0.5, .nan]}": "studies.width.sweep.model.width[1]: nan is not a finite",
}
SIZES = {
    "data.val_size=100000": "data.val_size: 100000 validation examples cannot be carved from fashion_mnist's 60000",
    "data.val_size=60000": "data.val_size: 60000 validation examples cannot be carved",
    "data.subsets.fashion_mnist_5k.n_train=56000": "data.subsets.fashion_mnist_5k.n_train: 56000 training examples, "
                                                   "but fashion_mnist has 55000 left",
}


@pytest.mark.parametrize("entry", sorted(NON_FINITE) + sorted(SIZES))
def test_numbers_training_would_refuse_are_refused_by_validate_and_the_plan(entry, capsys):
    """NaN and ±inf pass JSON Schema's bounds, and a split larger than the dataset passes the schema: both
    are refused by `lmcflow validate` and by the plan the workflow builds its DAG from, before any job."""
    from lmcflow.plan import Plan

    expect = {**NON_FINITE, **SIZES}[entry]
    assert main(["validate", "--config", entry]) == 2
    assert expect in first_line(capsys)
    with pytest.raises(ConfigError, match=expect.replace("[", r"\[").replace("]", r"\]")):
        Plan.from_files([], parse_overrides([entry]))
