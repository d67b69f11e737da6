"""The claim layer's core: registry entries, config checks, verdict logic, the claim JSON and its table row."""
import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lmcflow.claims import REGISTRY, claim_row, combine
from lmcflow.claims.core import Criterion
from lmcflow.claims.stats import Estimate
from lmcflow.config import ConfigError, check_semantics, expand_points
from lmcflow.config.catalog import ARCHITECTURES, dataset_names
from lmcflow.tables import make_frame
from tests.claim_tables import verdict
from tests.test_claim_power import CASES

REPO = Path(__file__).resolve().parents[1]
TINY = yaml.safe_load((REPO / "tests/configs/tiny.yaml").read_text())
JSON_KEYS = {"format", "claim_id", "paper", "statement", "study", "studies", "verdict", "reason", "statistic_name",
             "statistic", "ci_low", "ci_high", "ci_level", "ci_method", "n_seeds", "n_pairs", "criteria", "controls",
             "reported", "paper_values", "scale", "params", "details", "endpoint_gate", "decided_by_convention",
             "regime", "null_controls", "convergence_gate", "thresholds"}


def test_registry_holds_the_eighteen_claims_of_both_papers_and_two_extensions():
    assert len(REGISTRY) == 20
    papers = {c.paper.split(" et al.")[0] for c in REGISTRY.values()}
    assert papers == {"Ito", "Bürgin", "extension of Ito"}
    assert sum(c.paper.startswith("extension of") for c in REGISTRY.values()) == 2
    for c in REGISTRY.values():
        assert c.statement and c.tables and c.unit in ("pair", "seed"), c.id


def test_every_threshold_says_where_it_comes_from():
    for cid, build in CASES.items():
        res = verdict(cid, build(True))
        for t in res["criteria"]:
            assert t["source"].startswith(("paper", "null", "control", "convention", "analytic", "same-run")), \
                (cid, t["name"], t["source"])
    # the width claims record every threshold and gate parameter with its kind (lmcflow/claims/thresholds.py)
    from lmcflow.claims.thresholds import SOURCES

    for cid in ("width-merge-accuracy", "lewc", "weak-additivity", "cross-transformation-cosine"):
        res = verdict(cid, CASES[cid](True))
        named = {k for k in res["params"] if k in SOURCES}
        assert set(res["thresholds"]) == named and {"max_late_loss_drop", "endpoint_min_learned"} <= named
        assert all(v["kind"] in ("paper", "analytic", "same-run", "convention") for v in res["thresholds"].values())


def test_every_mechanism_claim_has_a_control():
    for cid in ("lewc", "weak-additivity", "reciprocal-orthogonality", "low-rank", "cross-transformation-cosine"):
        res = verdict(cid, CASES[cid](True))
        assert res["controls"] and all(c["verdict"] == "supported" for c in res["controls"]), cid


@pytest.mark.parametrize("side,threshold,ci,expected", [
    (">", 0.5, (0.6, 0.7), "supported"), (">", 0.5, (0.3, 0.4), "not_supported"),
    (">", 0.5, (0.4, 0.6), "inconclusive"),
    (">", 0.0, (0.0, 0.0), "not_supported"), ("<", 0.5, (0.3, 0.4), "supported"),
    ("<", 0.5, (0.6, 0.7), "not_supported"),
    ("within", 0.01, (-0.005, 0.005), "supported"), ("within", 0.01, (0.02, 0.03), "not_supported"),
    ("within", 0.01, (-0.005, 0.02), "inconclusive"), (">", 0.5, (math.nan, math.nan), "inconclusive"),
])
def test_a_test_is_decided_by_its_whole_interval(side, threshold, ci, expected):
    t = Criterion("t", "", Estimate(sum(ci) / 2, ci[0], ci[1], 5), side, threshold, "convention")
    assert t.verdict == expected


def test_combine():
    assert combine("supported", "supported") == "supported"
    assert combine("supported", "inconclusive") == "inconclusive"
    assert combine("supported", "not_supported", "inconclusive") == "not_supported"
    assert combine() == "inconclusive"


def test_claim_json_is_stable_and_its_row_has_the_declared_schema():
    res = verdict("width-merge-accuracy", CASES["width-merge-accuracy"](True))
    assert set(res) == JSON_KEYS and res["format"] == 2
    assert res["ci_method"].startswith("delete-one-seed jackknife")
    assert {"name", "statistic", "ci_low", "ci_high", "side", "threshold", "source", "kind", "control",
            "verdict"} <= set(res["criteria"][0])
    json.dumps(res, allow_nan=False)  # plain JSON: missing numbers are null, never NaN
    row = claim_row(res)
    df = make_frame("claims", [row])
    assert df.paper_quantity[0].startswith("plain-average midpoint") and df.n_seeds[0] == 6
    assert df.our_value[0] == pytest.approx(res["reported"]["barrier_widest"]["statistic"])  # Table 1's quantity


def check(cfg):
    check_semantics(cfg, REGISTRY, dataset_names(cfg["data"]), ARCHITECTURES)
    return expand_points(cfg)


def test_tiny_config_restricts_alignment_to_default_arm():
    from lmcflow.config import mechanism_methods, merge_methods
    pts = check(copy.deepcopy(TINY))
    assert merge_methods(pts[("width", "width-1__weight_decay-0.003")]) == \
        ["identity", "weight_matching", "activation_matching", "random_permutation"]
    assert merge_methods(pts[("width", "width-1__weight_decay-0.0001")]) == ["identity"]
    assert all(mechanism_methods(p) == ["identity"] for p in pts.values())


def test_claims_need_their_methods_arms_and_seeds():
    cfg = copy.deepcopy(TINY)
    cfg["studies"]["width"]["merge"]["alignment"]["at"] = {"train.weight_decay": [3e-3], "model.width": [1.0]}
    with pytest.raises(ConfigError, match="weight_matching.*narrowest width 0.25"):
        check(cfg)
    cfg = copy.deepcopy(TINY)
    cfg["studies"]["width"]["analysis"]["mechanism"]["methods"] = []
    with pytest.raises(ConfigError, match="mechanism metrics"):
        check(cfg)
    cfg = copy.deepcopy(TINY)
    cfg["studies"]["width"]["seeds"] = [0]
    with pytest.raises(ConfigError, match="compares seed pairs"):
        check(cfg)
    cfg = copy.deepcopy(TINY)
    cfg["claims"]["lewc"]["min_lewc"] = 0.9
    with pytest.raises(ConfigError, match=r"claims.lewc: unknown parameter\(s\) \['min_lewc'\]"):
        check(cfg)
    cfg = copy.deepcopy(TINY)
    cfg["studies"]["width"]["sweep"] = {"model.width": [0.25, 1.0], "train.weight_decay": [5e-4, 1e-4]}
    cfg["studies"]["width"]["merge"]["alignment"]["at"] = {}
    with pytest.raises(ConfigError, match=r"claims.width-merge-accuracy.weight_decay: 0.003 is not a value"):
        check(cfg)
    cfg["claims"] = {k: {**v, "weight_decay": 5e-4} for k, v in cfg["claims"].items()}
    # the random-feature reference (untrained partners at the widest width) is trained for the 3e-3 arm only
    with pytest.raises(ConfigError, match=r"claims.lewc: .* untrained \(random-feature\) partner B at the widest "
                                          r"width 1, which points \['width-1__weight_decay-0.0005'\]"):
        check(cfg)
    cfg["studies"]["width"]["analysis"]["null_partners"]["at"]["train.weight_decay"] = [5e-4]
    check(cfg)  # selecting the arm that exists is enough
    del cfg["studies"]["width"]["analysis"]["null_partners"]
    with pytest.raises(ConfigError, match=r"add untrained to studies.width.analysis.null_partners.kinds"):
        check(cfg)


def test_width_claims_read_several_studies_identifiability_claims_one():
    """Every width claim may read several studies (Table 1's rows; the MLP with and without biases; VGG-11 beside
    the MLP for the weak weight-decay ablation); the identifiability claims read one."""
    cfg = copy.deepcopy(TINY)
    cfg["studies"]["width_b"] = copy.deepcopy(cfg["studies"]["width"])
    for cid in cfg["claims"]:
        cfg["claims"][cid]["study"] = ["width", "width_b"]
    check(cfg)
    ident = yaml.safe_load((REPO / "tests/configs/tiny_identifiability.yaml").read_text())
    ident["studies"]["sym_b"] = copy.deepcopy(ident["studies"]["sym"])
    ident["claims"]["sigma-f-identity"]["study"] = ["sym", "sym_b"]
    with pytest.raises(ConfigError, match="claims.sigma-f-identity.study: this claim reads one study"):
        check(ident)
    cfg["claims"] = {k: {**v, "study": "width"} for k, v in cfg["claims"].items()}
    cfg["claims"]["weight-matching-no-gain"]["study"] = ["width", "widht"]
    with pytest.raises(ConfigError, match="'widht' is not a study"):
        check(cfg)


def test_table_claim_and_figure_jobs_do_not_import_torch():
    """About 60 jobs of the default run only read tables; torch's import (~2.5 s of CPU) stays out of them."""
    code = ("import sys, lmcflow.jobs.report, lmcflow.jobs.figures, lmcflow.claims, lmcflow.tables, lmcflow.metrics; "
            "assert 'torch' not in sys.modules, [m for m in sys.modules if m.startswith('torch')][:5]")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
