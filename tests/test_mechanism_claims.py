"""Width-paper alignment and mechanism claims on hand-made tables: each verdict is reachable,
and only the selected weight-decay arm is read."""
import copy
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from lmcflow.claims import REGISTRY
from lmcflow.config import ConfigError, check_semantics, expand_points
from lmcflow.data import dataset_names
from lmcflow.models import ARCHITECTURES

TINY = yaml.safe_load((Path(__file__).resolve().parent / "configs/tiny.yaml").read_text())

PAIRS = list(itertools.combinations(range(4), 2))
WIDTHS = (0.25, 1.0, 4.0)
DEFAULT, WEAK = 3e-3, 1e-4


def run(cid, tables, **params):
    claim = REGISTRY[cid]
    return claim.evaluate(tables, claim.params(params))


def layer_table(fn, noise=0.002, wds=(DEFAULT,)):
    """layer_metrics rows: fn(width, layer, wd) -> dict of metric values (plus small per-pair noise)."""
    rng = np.random.default_rng(0)
    rows = []
    for (a, b), w, layer, wd, lam in itertools.product(PAIRS, WIDTHS, (1, 2), wds, (0.0, 0.25, 0.5, 1.0)):
        vals = {k: v + rng.normal(0, noise) for k, v in fn(w, layer, wd).items()}
        rows.append(dict(seed_a=a, seed_b=b, width=w, layer=layer, weight_decay=wd, method="identity",
                         lam_paper=lam, lam_path=1 - lam, weak_additivity_gaussian=0.9304, **vals))
    return pd.DataFrame(rows)


def barrier_table(fn, noise=0.002, wds=(DEFAULT,), methods=("identity",), definitions=("entezari", "midpoint")):
    """barriers rows: fn(width, method, wd) -> error barrier."""
    rng = np.random.default_rng(1)
    rows = []
    for (a, b), w, m, wd, d in itertools.product(PAIRS, WIDTHS, methods, wds, definitions):
        rows.append(dict(seed_a=a, seed_b=b, width=w, method=m, weight_decay=wd, split="test", metric="error",
                         calibrated=False, definition=d, value=fn(w, m, wd) + rng.normal(0, noise)))
    return pd.DataFrame(rows)


def lewc_fn(lewc_wide):
    def fn(w, layer, wd):
        lewc = {0.25: 0.6, 1.0: 0.8, 4.0: lewc_wide}[w] if wd == DEFAULT else 0.5
        return {"lewc_cos": lewc if layer > 1 else 0.99, "llfc_cos": 0.5 if layer > 1 else 0.99}
    return fn


def test_lewc_claim():
    r = run("lewc", {"layer_metrics": layer_table(lewc_fn(0.97))})
    assert r["verdict"] == "supported" and r["statistic"] == pytest.approx(0.97, abs=0.01)
    assert r["n_pairs"] == 6 and r["ci_low"] <= r["statistic"] <= r["ci_high"]
    assert run("lewc", {"layer_metrics": layer_table(lewc_fn(0.7))})["verdict"] == "not_supported"
    # the weak arm (LEWC 0.5 everywhere) must not leak into the default-arm statistic
    both = layer_table(lewc_fn(0.97), wds=(DEFAULT, WEAK))
    assert run("lewc", {"layer_metrics": both})["statistic"] == pytest.approx(0.97, abs=0.01)


def test_weak_additivity_claim():
    def fn(level_wide):
        return lambda w, layer, wd: {"weak_additivity": {0.25: 0.93, 1.0: 0.93, 4.0: level_wide}[w]}
    assert run("weak-additivity", {"layer_metrics": layer_table(fn(0.94))})["verdict"] == "supported"
    assert run("weak-additivity", {"layer_metrics": layer_table(fn(0.80))})["verdict"] == "not_supported"
    r = run("weak-additivity", {"layer_metrics": layer_table(fn(0.905), noise=0.02)})
    assert r["verdict"] == "inconclusive" and r["details"]["gaussian_reference"] == pytest.approx(0.93, abs=0.01)


def test_reciprocal_orthogonality_and_low_rank_claims():
    def falling(w, layer, wd):
        v = {0.25: 0.9, 1.0: 0.5, 4.0: 0.2}[w]
        return {"cross_ratio_a": v, "cross_ratio_b": v, "cross_cos": 1 - v, "erank_rel_a": v, "erank_rel_b": v,
                "rank99_frac_a": v, "rank99_frac_b": v}

    def rising(w, layer, wd):
        return {k: 1.2 - v for k, v in falling(w, layer, wd).items()}
    for cid in ("reciprocal-orthogonality", "low-rank"):
        r = run(cid, {"layer_metrics": layer_table(falling)})
        assert r["verdict"] == "supported" and r["statistic"] == pytest.approx(0.7, abs=0.02), cid
        assert run(cid, {"layer_metrics": layer_table(rising)})["verdict"] == "not_supported", cid


def test_weight_decay_claim():
    def bar(gap):
        return lambda w, m, wd: 0.01 + (gap if wd == WEAK and w == 4.0 else 0.0)
    lm = layer_table(lewc_fn(0.97), wds=(DEFAULT, WEAK))
    r = run("weight-decay", {"barriers": barrier_table(bar(0.1), wds=(DEFAULT, WEAK)), "layer_metrics": lm})
    assert r["verdict"] == "supported" and r["statistic"] == pytest.approx(0.1, abs=0.01)
    assert r["details"]["lewc_default_minus_weak"] == pytest.approx(0.47, abs=0.02)
    r = run("weight-decay", {"barriers": barrier_table(bar(-0.05), wds=(DEFAULT, WEAK)), "layer_metrics": lm})
    assert r["verdict"] == "not_supported"
    r = run("weight-decay", {"barriers": barrier_table(bar(0.1)), "layer_metrics": lm})
    assert r["verdict"] == "inconclusive" and r["n_pairs"] == 0


def test_weight_matching_no_gain_claim():
    methods = ("identity", "weight_matching")

    def fn(wide_gain):
        def f(w, m, wd):
            ident = {0.25: 0.3, 1.0: 0.1, 4.0: 0.03}[w]
            gain = {0.25: 0.25, 1.0: 0.08, 4.0: wide_gain}[w]
            return ident - (gain if m == "weight_matching" else 0.0)
        return f
    r = run("weight-matching-no-gain", {"barriers": barrier_table(fn(0.002), methods=methods)})
    assert r["verdict"] == "supported" and r["details"]["gain_narrowest"] == pytest.approx(0.25, abs=0.01)
    r = run("weight-matching-no-gain", {"barriers": barrier_table(fn(0.03), methods=methods)})
    assert r["verdict"] == "not_supported" and r["statistic"] == pytest.approx(0.03, abs=0.005)


def test_random_permutation_claim():
    methods = ("identity", "random_permutation")

    def fn(wide_cost):
        return lambda w, m, wd: 0.02 + (({0.25: 0.4, 1.0: 0.1, 4.0: wide_cost}[w]) if m != "identity" else 0.0)
    r = run("random-permutation", {"barriers": barrier_table(fn(0.001), methods=methods)})
    assert r["verdict"] == "supported" and r["details"]["mean_random_narrowest"] > 0.4
    assert run("random-permutation", {"barriers": barrier_table(fn(0.1), methods=methods)})["verdict"] == "not_supported"
    assert run("random-permutation", {"barriers": barrier_table(fn(0.01), methods=methods, noise=0.01)})["verdict"] \
        == "inconclusive"


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


def test_claims_need_their_methods_and_arms():
    cfg = copy.deepcopy(TINY)
    cfg["studies"]["width"]["merge"]["alignment"]["at"] = {"train.weight_decay": [3e-3], "model.width": [1.0]}
    with pytest.raises(ConfigError, match="weight_matching.*narrowest width 0.25"):
        check(cfg)
    cfg = copy.deepcopy(TINY)
    cfg["studies"]["width"]["analysis"]["mechanism"]["methods"] = []
    with pytest.raises(ConfigError, match="mechanism metrics"):
        check(cfg)
    cfg = copy.deepcopy(TINY)
    cfg["studies"]["width"]["sweep"] = {"model.width": [0.25, 1.0], "train.weight_decay": [5e-4, 1e-4]}
    cfg["studies"]["width"]["merge"]["alignment"]["at"] = {}
    with pytest.raises(ConfigError, match=r"claims.width-merge-accuracy.weight_decay: 0.003 is not a value"):
        check(cfg)
    cfg["claims"] = {k: {**v, "weight_decay": 5e-4} for k, v in cfg["claims"].items()}
    check(cfg)  # selecting the arm that exists is enough
