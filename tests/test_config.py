"""Bad configs fail before any job runs, with the key named."""
import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lmcflow.claims import REGISTRY
from lmcflow.config import ConfigError, check_semantics, expand_points, resolve_config, swept_values, validate_config
from lmcflow.config.catalog import ARCHITECTURES, dataset_names
from lmcflow.config.point_schema import validate_points

REPO = Path(__file__).resolve().parents[1]
TINY = yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text())
# The mutations below edit the width sweep as one full grid; the shipped list of grids is checked by
# test_shipped_configs_are_valid, test_sweep_list_* and the end-to-end run.
TINY["studies"]["width"]["sweep"] = {"model.width": [0.25, 1.0], "train.weight_decay": [3.0e-3, 1.0e-4]}


def check(cfg):
    """What common.smk runs at DAG construction: schema and defaults, semantics, point validation."""
    cfg = validate_config(copy.deepcopy(cfg))
    check_semantics(cfg, REGISTRY, dataset_names(cfg["data"]), ARCHITECTURES)
    validate_points(expand_points(cfg))


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")) + [REPO / "tests/configs/tiny.yaml"])
def test_shipped_configs_are_valid(path):
    check(yaml.safe_load(path.read_text()))


def mutate(fn):
    cfg = copy.deepcopy(TINY)
    fn(cfg)
    return cfg


BAD = {
    "unknown top-level key": (lambda c: c.update(epochs=3), ConfigError, "epochs"),
    "unknown train key": (lambda c: c["defaults"]["train"].update(learning_rate=0.1), ConfigError, "learning_rate"),
    "wrong type": (lambda c: c["defaults"]["train"].update(epochs="ten"), ConfigError, "ten"),
    "non-positive width": (lambda c: c["studies"]["width"]["sweep"].update({"model.width": [0.5, 0]}), ConfigError, "model.width"),
    "wrong type in sweep": (lambda c: c["studies"]["width"]["sweep"].update({"train.epochs": [3, "ten"]}), ConfigError, "train.epochs: 'ten' is not of type 'integer'"),
    "negative width default": (lambda c: c["defaults"]["model"].update(width=-1), ConfigError, "-1"),
    "unknown dataset": (lambda c: c["studies"]["width"].update(dataset="imagenet"), ConfigError, "imagenet"),
    "unknown arch": (lambda c: c["defaults"]["model"].update(arch="vit"), ConfigError, "vit"),
    "unknown arch in sweep": (lambda c: c["studies"]["width"]["sweep"].update({"model.arch": ["mlp", "vit"]}), ConfigError, "model.arch"),
    "sweep of a non-setting": (lambda c: c["studies"]["width"]["sweep"].update({"train.colour": ["red"]}), ConfigError, "train.colour"),
    "unknown claim id": (lambda c: c["claims"].update({"free-lunch": {"study": "width"}}), ConfigError, "free-lunch"),
    "claim on undefined study": (lambda c: c["claims"].update({"width-merge-accuracy": {"study": "depth"}}), ConfigError, "depth"),
    "too few seeds for a claim": (lambda c: c["studies"]["width"].update(seeds=[0]), ConfigError, "seed pairs"),
    "even λ grid": (lambda c: c["defaults"]["merge"].update(lambdas=4), ConfigError, "merge.lambdas"),
    "duplicate seeds": (lambda c: c["studies"]["width"].update(seeds=[0, 0, 1]), ConfigError, "distinct"),
    # alignment and mechanism
    "REPAIR'd method never merged": (lambda c: c["studies"]["width"]["merge"].update(methods=["identity"], repair={"enabled": True, "methods": ["weight_matching"]}), ConfigError, "merge.repair.methods"),
    "unknown merge method": (lambda c: c["studies"]["width"]["merge"].update(methods=["identity", "git_rebasin"]), ConfigError, "git_rebasin"),
    "alignment.at names no setting": (lambda c: c["studies"]["width"]["merge"]["alignment"].update(at={"model.widht": [1.0]}), ConfigError, "model.widht"),
    "alignment.at matches no point": (lambda c: c["studies"]["width"]["merge"]["alignment"].update(at={"model.width": [3.0]}), ConfigError, "matches no point"),
    "mechanism method not merged": (lambda c: (c["studies"]["width"]["merge"].update(methods=["identity"]), c["studies"]["width"]["analysis"]["mechanism"].update(methods=["identity", "activation_matching"])), ConfigError, "analysis.mechanism.methods"),
    "unknown mechanism key": (lambda c: c["studies"]["width"]["analysis"]["mechanism"].update(n_samples=100), ConfigError, "n_samples"),
    "mechanism λ without ½": (lambda c: c["studies"]["width"]["analysis"]["mechanism"].update(lambdas=[0.0, 0.25, 1.0]), ConfigError, "λ = 0.5"),
    "claim arm not trained": (lambda c: c["claims"]["weight-decay"].update(weak_weight_decay=1e-5), ConfigError, "weak_weight_decay"),
    "claim method not aligned there": (lambda c: c["studies"]["width"]["merge"]["alignment"].update(at={"model.width": [1.0]}), ConfigError, "narrowest"),
    # identifiability paper
    "unknown symmetry key": (lambda c: c["defaults"]["model"]["symmetry"].update(sigma=1.0), ConfigError, "sigma"),
    "n_fixed fraction above 1": (lambda c: c["defaults"]["model"].update(symmetry={"kind": "w_asymmetric", "n_fixed": 1.5}), ConfigError, "1.5"),
    "unknown mask_type": (lambda c: c["defaults"]["model"].update(symmetry={"kind": "w_asymmetric", "mask_type": "dense"}), ConfigError, "dense"),
    "per-layer list too short": (lambda c: c["defaults"]["model"].update(symmetry={"kind": "w_asymmetric", "sigma_f_scale": [1.0, 0.5]}), ConfigError, "model.symmetry.sigma_f_scale"),
    "negative sigma_f in sweep": (lambda c: c["studies"]["width"]["sweep"].update({"model.symmetry.sigma_f": [0.0, -1.0]}), ConfigError, "sigma_f"),
    "unknown analysis key": (lambda c: c["studies"]["width"]["analysis"].update(swapcosts=True), ConfigError, "swapcosts"),
    "unknown synthetic parameter": (lambda c: c["data"].update(synthetic={"gs": {"generator": "gaussian_subspace", "dims": 3}}), ConfigError, "dims"),
    "synthetic k above d": (lambda c: c["data"].update(synthetic={"gs": {"generator": "gaussian_subspace", "k": 70, "d": 64}}), ConfigError, "data.synthetic.gs.k"),
    "coherence m above d/2": (lambda c: c["data"].update(synthetic={"coh": {"generator": "coherence", "m": 11, "d": 20}}), ConfigError, "data.synthetic.coh.m"),
    "subset of a non-torchvision base": (lambda c: c["data"].update(subsets={"fm": {"base": "imagenet", "n_train": 10}}), ConfigError, "imagenet"),
    "sum_relu on a classification dataset": (lambda c: c["defaults"]["model"].update(arch="sum_relu"), ConfigError, "sum_relu"),
    "identifiability claim without a σ_F sweep": (lambda c: c["claims"].update({"sigma-f-identity": {"study": "width"}}), ConfigError, "model.symmetry.sigma_f"),
    "identifiability claim parameter unknown": (lambda c: (c["studies"]["width"]["sweep"].update({"model.symmetry.sigma_f": [0.0, 1.0]}), c["defaults"]["model"].update(symmetry={"kind": "w_asymmetric", "sigma_f": 1.0}), c["studies"]["width"]["analysis"].update(identifiability=True), c["claims"].update({"sigma-f-identity": {"study": "width", "threshold": 0.5}})), ConfigError, "threshold"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_config_rejected_with_key(name):
    fn, exc, needle = BAD[name]
    with pytest.raises(exc) as err:
        check(mutate(fn))
    assert needle in str(err.value)


def test_point_expansion_ids_and_values():
    cfg = mutate(lambda c: c["studies"]["width"]["sweep"].update({"train.weight_decay": [3e-3, 1e-4]}))
    pts = expand_points(cfg)
    assert ("width", "width-0.25__weight_decay-0.0001") in pts
    p = pts[("width", "width-0.25__weight_decay-0.0001")]
    assert p.model["width"] == 0.25 and p.train["weight_decay"] == 1e-4 and p.pairs == [(0, 1), (0, 2), (1, 2)]
    assert len(pts) == 5  # 4 points and the untrained partners of the widest 3e-3 one (analysis.null_partners)
    partner = pts[("width", "width-1__weight_decay-0.003__partner-untrained")]
    assert partner.partner == "untrained" and partner.train["epochs"] == 0 and partner.seeds == [1000, 1001, 1002]


def test_snakemake_reports_bad_config_before_any_job(tmp_path):
    cfg = mutate(lambda c: c["studies"]["width"]["sweep"].update({"model.width": [0.5, -2]}))
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-n", "--snakefile", str(REPO / "Snakefile"),
                          "--configfile", str(path), "--directory", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0
    assert "Invalid config" in out and "model.width" in out
    assert "Traceback" not in out


def test_point_columns_report_the_sigma_f_the_layers_use():
    from lmcflow.config import Point
    from lmcflow.symmetry import check_symmetry
    from lmcflow.tables import point_columns

    train = {"weight_decay": 0.0, "optimizer": "sgd", "lr": 0.1, "epochs": 1, "batch_size": 8}
    masked = Point("s", "p", "d", [0], {"arch": "mlp", "width": 1.0, "symmetry": {"kind": "w_asymmetric"}}, train, {})
    assert masked.merge["lambdas"] == 11 and masked.model["depth"] == 2  # schema defaults fill every block
    assert point_columns(masked)["sigma_f"] == check_symmetry({"kind": "w_asymmetric"})["sigma_f"]
    standard = Point("s", "p", "d", [0], {"arch": "mlp", "width": 1.0, "symmetry": {"kind": "standard"}}, train, {})
    assert point_columns(standard)["sigma_f"] == 0.0


def test_sweep_list_unites_grids_in_order():
    cfg = mutate(lambda c: c["studies"]["width"].update(sweep=[
        {"model.width": [0.25, 1.0], "train.weight_decay": [3e-3]},
        {"model.width": [1.0], "train.weight_decay": [1e-4]}]))
    check(cfg)
    pts = expand_points(cfg)
    assert [pid for _, pid in pts] == ["width-0.25__weight_decay-0.003", "width-1__weight_decay-0.003",
                                       "width-1__weight_decay-0.0001", "width-1__weight_decay-0.003__partner-untrained"]
    assert pts[("width", "width-1__weight_decay-0.0001")].train["weight_decay"] == 1e-4
    # claims that need a key swept over ≥ 2 values count the values of all grids together
    assert swept_values(cfg["studies"]["width"], "train.weight_decay") == [3e-3, 1e-4]


@pytest.mark.parametrize("sweep,needle", [
    ([{"model.width": [0.25]}, {"train.weight_decay": [1e-4]}], "same keys"),
    ([{"model.width": [0.25, 1.0]}, {"model.width": [1.0]}], "must not overlap"),
    ([{"model.width": [0.25]}, {}], "sweep[1]"),
    ([{"model.width": []}], "sweep[0]['model.width']"),
])
def test_sweep_list_errors_name_the_grid(sweep, needle):
    with pytest.raises(ConfigError) as err:
        check(mutate(lambda c: c["studies"]["width"].update(sweep=sweep)))
    assert needle in str(err.value)


# ---------------------------------------------------------------- which config a run uses (resolve_config)
def write(tmp_path, name, cfg):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_default_config_when_no_file_is_given():
    cfg = resolve_config()
    assert set(cfg["studies"]) == set(yaml.safe_load((REPO / "config/config.yaml").read_text())["studies"])
    assert cfg["defaults"] == {} and cfg["threads"] == {"train": 1, "merge": 1}  # schema defaults filled


def test_overrides_go_on_top_of_the_default_and_of_a_file(tmp_path):
    assert resolve_config(overrides={"device": "cpu"})["device"] == "cpu"
    path = write(tmp_path, "mine.yaml", {"studies": TINY["studies"], "claims": {}, "device": "cuda"})
    cfg = resolve_config([path], {"threads": {"train": 3}})
    assert cfg["device"] == "cuda" and cfg["threads"] == {"train": 3, "merge": 1}


def test_a_config_file_runs_only_its_own_studies(tmp_path):
    path = write(tmp_path, "mine.yaml", {"studies": {"w": TINY["studies"]["width"]}, "defaults": TINY["defaults"]})
    cfg = resolve_config([path])
    assert list(cfg["studies"]) == ["w"] and cfg["claims"] == {}  # no default study or claim merged in
    assert cfg["paths"] == {"results": "results", "work": "work", "logs": "logs"}  # settings fall back


def test_later_config_files_merge_onto_earlier_ones(tmp_path):
    a = write(tmp_path, "a.yaml", {"studies": {"w": TINY["studies"]["width"]}})
    b = write(tmp_path, "b.yaml", {"device": "cpu", "studies": {"w": {"seeds": [0, 1, 2, 3]}}})
    cfg = resolve_config([a, b])
    assert cfg["device"] == "cpu" and cfg["studies"]["w"]["seeds"] == [0, 1, 2, 3]
    assert cfg["studies"]["w"]["dataset"] == "fashion_mnist"


@pytest.mark.parametrize("content", ["{}\n", "device: cpu\n", "studies: {}\n"])
def test_a_config_without_studies_is_refused(tmp_path, content):
    path = tmp_path / "empty.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match="must name at least one study under `studies:`"):
        resolve_config([path])


def test_a_config_that_is_not_a_mapping_is_refused(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        resolve_config([path])


def test_snakemake_config_overrides_and_empty_configfile(tmp_path):
    smk = [str(Path(sys.executable).with_name("snakemake")), "-n", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(tmp_path)]
    res = subprocess.run(smk + ["--config", "device=cpu"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "rule train:" in res.stdout + res.stderr
    empty = write(tmp_path, "empty.yaml", {})
    res = subprocess.run(smk + ["--configfile", str(empty)], capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "must name at least one study" in out and "Traceback" not in out


def test_config_checks_do_not_import_torch():
    """What the DAG is built from (the default config checked as at DAG construction, the claims registry) never
    imports torch: every Snakemake start and dry run would pay ~3 CPU-s for it (lmcflow.config.catalog)."""
    code = ("import sys; from lmcflow.cli import load_and_check; cfg, points = load_and_check(None); "
            "assert len(points) > 10; print('torch' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"


def test_catalog_names_the_generators_lmcflow_synthetic_implements():
    from lmcflow.config.catalog import SYNTHETIC_GENERATORS
    from lmcflow.synthetic import GENERATORS

    assert tuple(GENERATORS) == SYNTHETIC_GENERATORS


def test_job_params_do_not_depend_on_the_key_order_of_the_config():
    """Snakemake compares params by their text: a re-ordered config file must give the same job dicts."""
    from lmcflow.config import Point, canonical

    model = {"arch": "mlp", "width": 1.0, "symmetry": {"kind": "w_asymmetric", "sigma_f": 1.0, "mask_seed": 0}}
    train = {"lr": 0.1, "epochs": 2, "optimizer": "sgd"}
    a = Point(study="s", point="p", dataset="d", seeds=[0, 1], model=model, train=train)
    b = Point(study="s", point="p", dataset="d", seeds=[0, 1], train=dict(reversed(train.items())),
              model={**dict(reversed(model.items())), "symmetry": dict(reversed(model["symmetry"].items()))})
    assert repr(a.job_dict("model", "train")) == repr(b.job_dict("model", "train"))
    assert list(canonical({"b": {"y": 1, "x": [{"d": 0, "c": 1}]}, "a": 2})) == ["a", "b"]
    assert canonical({"b": {"y": 1, "x": [{"d": 0, "c": 1}]}})["b"]["x"] == [{"c": 1, "d": 0}]


def test_the_schema_loads_as_the_pure_python_safe_loader_reads_it():
    """load_schema uses libyaml's loader for speed; the defaults it fills in (their key order too: job params are
    compared by their text) must be those of yaml.safe_load."""
    from lmcflow.config.schema import SCHEMA_PATH, load_schema

    assert repr(load_schema()) == repr(yaml.safe_load(SCHEMA_PATH.read_text()))
