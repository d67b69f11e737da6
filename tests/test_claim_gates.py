"""Endpoint gates, convention margins and paper comparability (lmcflow.claims.gates, .margins).

The gate is tested on real models: MLPs trained on Fashion-MNIST, merged and evaluated with lmcflow's own
path evaluation and barrier code, with one model replaced by an untrained one or by one trained on shuffled
labels (real metrics of real models in the runs, interpolation and barrier tables)."""
from __future__ import annotations

import dataclasses
import itertools
import json
import math

import pytest
import torch

from lmcflow.claims import REGISTRY, claim_row, evaluate_claim
from lmcflow.claims.gates import GATE_DEFAULTS, dataset_facts, endpoint_gate
from lmcflow.claims.margins import comparability, keeps_for
from lmcflow.cli import format_claim
from lmcflow.tables import TABLES, barrier_rows, make_frame
from tests.claim_tables import table

SCALE = {"dataset": ["fashion_mnist"], "arch": ["mlp"], "widths": [0.25, 1.0],
         "data": dataset_facts(["fashion_mnist"])}


def runs(accs, loss=0.4, epochs=5, point="p", dataset="fashion_mnist"):
    return table("runs", [{"point": point, "dataset": dataset, "seed": s, "epochs": epochs, "test_acc": a,
                           "test_loss": loss} for s, a in enumerate(accs)])


def gate(accs, **kw):
    return endpoint_gate({"runs": runs(accs, **kw)}, GATE_DEFAULTS, SCALE)


# --------------------------------------------------------------------------- the gate's thresholds
def test_gate_thresholds():
    """Median 0.88 of five seeds, chance 0.1: a model passes within 0.05 of the median and above
    0.1 + 0.5 × 0.78 = 0.49; a point whose median closes less than a quarter of the way from chance to 1
    (0.1 + 0.25 × 0.9 = 0.325) fails every model; a loss that is not finite fails; an untrained arm (epochs 0) is
    not checked; a regression model is checked on the fraction of the target variance it explains (1 − MSE / the
    mean predictor's, chance 0), or on its loss alone where the config gives no baseline; without a runs table the
    gate fails."""
    assert gate([0.88, 0.88, 0.88, 0.88, 0.831])["passed"]
    g = gate([0.88, 0.88, 0.88, 0.88, 0.829])
    assert not g["passed"] and [f["seed"] for f in g["failed"]] == [4] and "below its point's median" in g["reason"]
    assert g["checked_models"] == 5 and g["criteria"]["chance"] == {"fashion_mnist": 0.1}
    # the drop is wide (a margin of 0.5), the chance floor decides: 0.1 + 0.5 × (0.5 − 0.1) = 0.3
    wide = {**GATE_DEFAULTS, "endpoint_max_drop": 0.5}
    assert endpoint_gate({"runs": runs([0.5, 0.5, 0.5, 0.31])}, wide, SCALE)["passed"]
    low = endpoint_gate({"runs": runs([0.5, 0.5, 0.5, 0.29])}, wide, SCALE)
    assert not low["passed"] and "chance 0.1" in low["reason"]
    at_chance = gate([0.11, 0.11, 0.11, 0.11])
    assert not at_chance["passed"] and len(at_chance["failed"]) == 4 and "of the way from chance" in at_chance["reason"]
    barely = gate([0.32, 0.32, 0.32, 0.32])  # the models work alike, but have learned little of the task
    assert not barely["passed"] and "below 0.325" in barely["reason"]
    assert gate([0.33, 0.33, 0.33, 0.33])["passed"]
    assert not gate([0.88] * 4, loss=math.inf)["passed"]
    assert gate([0.1] * 4, epochs=0)["reason"].startswith("no trained model")
    assert gate([math.nan] * 4, dataset="coherence_m1")["passed"]  # no baseline known: the loss alone
    facts = dataset_facts(["coherence_m1"], {"synthetic": {"coherence_m1": {"generator": "coherence", "m": 1}}})
    assert facts["coherence_m1"]["baseline_mse"] == pytest.approx(1 - 1 / math.pi)  # Var relu(z₁ + z₂)
    reg = {**SCALE, "data": facts}
    fit = endpoint_gate({"runs": runs([math.nan] * 4, loss=0.05, dataset="coherence_m1")}, GATE_DEFAULTS, reg)
    assert fit["passed"] and fit["criteria"]["chance"] == {"coherence_m1": 0.0}
    poor = endpoint_gate({"runs": runs([math.nan] * 4, loss=0.6, dataset="coherence_m1")}, GATE_DEFAULTS, reg)
    assert not poor["passed"] and "R²" in poor["reason"]  # 12% of the variance: no better than a baseline
    assert not endpoint_gate({}, GATE_DEFAULTS, SCALE)["passed"]
    # only the points the claim's other tables hold are checked
    other = table("barriers", [{"point": "q", "seed_a": 0, "seed_b": 1}])
    assert endpoint_gate({"runs": runs([0.88, 0.1]), "barriers": other}, GATE_DEFAULTS, SCALE)["reason"].startswith(
        "no trained model")


def test_gate_parameters_are_checked_with_the_config():
    from lmcflow.config import ConfigError, Point

    claim_ = REGISTRY["width-merge-accuracy"]
    points = [Point("s", f"w{w}", "fashion_mnist", [0, 1], model={"arch": "mlp", "width": w}) for w in (1.0, 2.0)]
    study = {"seeds": [0, 1], "sweep": {"model.width": [1, 2]}}
    claim_.check_config("width-merge-accuracy", {"study": "s", "endpoint_max_drop": 0.1}, "s", study, points)
    with pytest.raises(ConfigError, match=r"claims.width-merge-accuracy.endpoint_min_above_chance: 1.5 must be"):
        claim_.check_config("width-merge-accuracy", {"study": "s", "endpoint_min_above_chance": 1.5}, "s", study,
                            points)
    assert "endpoint_max_drop" not in REGISTRY["intrinsic-dimension"].defaults  # an ungated claim has no gate


def test_dataset_facts_from_the_config():
    data = {"subsets": {"fashion_mnist_5k": {"base": "fashion_mnist", "n_train": 5000}},
            "synthetic": {"gaussian_k2": {"generator": "gaussian_subspace", "classes": 20, "d": 128, "k": 2,
                                          "n_train": 5000},
                          "coherence_m1": {"generator": "coherence", "m": 1, "d": 20}}}
    f = dataset_facts(["fashion_mnist_5k", "gaussian_k2", "coherence_m1", "cifar100"], data)
    assert f["fashion_mnist_5k"] == {"family": "fashion_mnist_5k", "base": "fashion_mnist", "task": "classification",
                                     "num_classes": 10, "d": None, "n_train": 5000}
    assert f["gaussian_k2"]["num_classes"] == 20 and f["gaussian_k2"]["family"] == "gaussian_subspace"
    assert f["coherence_m1"]["task"] == "regression" and f["cifar100"]["num_classes"] == 100


# --------------------------------------------------------------------------- convention margins
@pytest.mark.parametrize(("side", "t", "low", "high", "want"), [
    (">", 0.9, 0.95, 0.97, (-math.inf, 0.95, 0.95)),   # supported for t < 0.95
    (">", 0.9, 0.85, 0.97, (0.85, 0.97, 0.85)),        # inconclusive; the nearer end flips it
    (">", 0.9, 0.80, 0.85, (0.85, math.inf, 0.85)),    # not supported for t ≥ 0.85
    ("<", 0.02, 0.0219, 0.0343, (-math.inf, 0.0219, 0.0219)),  # a width-merge-accuracy CI
    ("<", 0.05, 0.01, 0.03, (0.03, math.inf, 0.03)),
    ("within", 0.01, -0.002, 0.005, (0.005, math.inf, 0.005)),
    ("within", 0.01, 0.02, 0.03, (0.0, 0.02, 0.02)),
    ("apart", 0.005, 0.008, 0.012, (0.0, 0.008, 0.008)),      # a null control: supported for δ < 0.008
    ("apart", 0.005, -0.012, -0.008, (0.0, 0.008, 0.008)),    # either direction
    ("apart", 0.01, 0.008, 0.012, (0.008, math.inf, 0.008)),  # inconclusive for δ ≥ 0.008, never not_supported
    ("apart", 0.0, -0.002, 0.004, (0.0, math.inf, math.nan)),  # an interval around 0: no δ passes it
])
def test_threshold_range_that_keeps_a_verdict(side, t, low, high, want):
    assert keeps_for(side, t, low, high) == pytest.approx(want, nan_ok=True)


def test_comparable_only_at_the_papers_dataset_architecture_and_scale():
    table1_mlp = {"dataset": "mnist", "arch": "mlp", "width": 16.0}
    ok, why = comparability(table1_mlp, SCALE)
    assert not ok and why == "paper: dataset mnist vs ours fashion_mnist; width 16 vs ours 1"
    assert comparability(table1_mlp, {"dataset": ["mnist"], "arch": ["mlp"], "widths": [1.0, 16.0]})[0]
    bürgin = {"dataset": "gaussian_subspace", "arch": "mlp", "d": 512, "n_train": 45000}
    ours = {"dataset": ["gaussian_k2"], "arch": ["mlp"], "widths": [1.0],
            "data": dataset_facts(["gaussian_k2"], {"synthetic": {"gaussian_k2": {
                "generator": "gaussian_subspace", "classes": 20, "d": 128, "n_train": 5000}}})}
    assert comparability(bürgin, ours) == (False, "paper: d 512 vs ours 128; n_train 45000 vs ours 5000")


# --------------------------------------------------------------------------- real models
SEEDS, WIDTHS, NULL_SEED = range(4), (0.25, 1.0), 3
GATED = ("width-merge-accuracy", "temperature-calibration", "logit-norm-decay")
INTERP = dict(TABLES["interpolation"])


@pytest.fixture(scope="module")
def studies(fmnist_path):
    """Tables of one width study (4 seeds × 2 widths, MLPs on 2,000 Fashion-MNIST images, weight decay 3e-3) and
    of the same study with seed 3 replaced by an untrained model and by one trained on shuffled labels."""
    from lmcflow.checkpoints import init_model
    from lmcflow.config import lambda_grid
    from lmcflow.data import Dataset, load_dataset
    from lmcflow.evaluation import evaluate
    from lmcflow.merging import evaluate_path
    from lmcflow.models import ModelSpec
    from lmcflow.seeding import generator
    from lmcflow.training import late_loss_drop, train

    full = load_dataset(fmnist_path)
    x, y = full.x["train"][:2000], full.y["train"][:2000]
    shuffled = y[torch.randperm(len(y), generator=generator("test-gate-shuffled-labels"))]
    xs = {"train": x, "val": full.x["val"][:500], "test": full.x["test"][:1000]}
    ys = {"train": y, "val": full.y["val"][:500], "test": full.y["test"][:1000]}

    def spec(width):
        return ModelSpec("mlp", (1, 28, 28), 10, width=width, depth=2, base_width=128)

    late = {}  # model -> its training loss's late drop (runs.train_loss_late_drop; NaN untrained)

    def model(width, seed, labels=None, untrained=False):
        m = init_model(spec(width), seed)
        late[id(m)] = math.nan
        if not untrained:
            cfg = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 3e-3, "epochs": 5,
                   "batch_size": 128, "schedule": "cosine", "precision": "fp32"}
            info = train(m, Dataset(xs, {**ys, "train": y if labels is None else labels}, full.meta), cfg, seed,
                         torch.device("cpu"))
            late[id(m)] = late_loss_drop(info["history"])
        return m

    data = Dataset(xs, ys, full.meta)
    out = {kind: {"runs": [], "interpolation": []} for kind in ("real", "untrained", "shuffled labels")}
    for width in WIDTHS:
        point = {"point": f"width-{width:g}", "dataset": "fashion_mnist", "arch": "mlp", "width": width, "depth": 2,
                 "weight_decay": 3e-3, "epochs": 5}
        real = {s: model(width, s) for s in SEEDS}
        nulls = {"untrained": model(width, 100, untrained=True), "shuffled labels": model(width, 200, shuffled)}
        for kind in out:
            models = {**real, NULL_SEED: nulls[kind]} if kind != "real" else real
            for s, m in models.items():
                e = evaluate(m, xs["test"], ys["test"])
                out[kind]["runs"].append({**point, "seed": s, "test_acc": e["acc"], "test_loss": e["loss"],
                                          "train_loss_late_drop": late[id(m)]})
            for a, b in itertools.combinations(SEEDS, 2):
                for r in evaluate_path(init_model(spec(width), 0), models[a].state_dict(), models[b].state_dict(),
                                       data, lambda_grid(5)):
                    out[kind]["interpolation"].append({**point, "seed_a": a, "seed_b": b,
                                                       **{k: v for k, v in r.items() if k in INTERP}})
    tables = {}
    for kind, rows in out.items():
        interp = table("interpolation", rows["interpolation"])
        tables[kind] = {"runs": table("runs", rows["runs"]), "interpolation": interp,
                        "barriers": make_frame("barriers", barrier_rows(interp))}
    return tables


def without_gate(monkeypatch, cid):
    monkeypatch.setitem(REGISTRY, cid, dataclasses.replace(REGISTRY[cid], gate_endpoints=False))


@pytest.mark.fmnist
@pytest.mark.parametrize("cid", GATED)
def test_a_useless_partner_makes_a_gated_claim_inconclusive(studies, cid, monkeypatch):
    real = evaluate_claim(cid, {"study": "s"}, studies["real"], SCALE)
    assert real["endpoint_gate"]["passed"] and real["endpoint_gate"]["checked_models"] == 8
    for kind in ("untrained", "shuffled labels"):
        res = evaluate_claim(cid, {"study": "s"}, studies[kind], SCALE)
        assert res["verdict"] == "inconclusive" and res["reason"].startswith("endpoint gate: 2 model(s)"), kind
        failed = res["endpoint_gate"]["failed"]
        assert {(f["point"], f["seed"]) for f in failed} == {("width-0.25", 3), ("width-1", 3)}
        assert all(f["test_acc"] < 0.3 for f in failed), failed  # the null models are near chance
        assert claim_row(res)["endpoint_gate"].startswith("endpoint gate: 2 model(s)")
        text = format_claim(claim_row(res))  # what `lmcflow claims` prints: the gate named once
        assert "endpoint gate: 2 model(s)" in text and "endpoint gate: endpoint gate" not in text
    without_gate(monkeypatch, cid)
    assert evaluate_claim(cid, {"study": "s"}, studies["real"], SCALE)["verdict"] == real["verdict"]


@pytest.mark.fmnist
def test_without_the_gate_a_useless_partner_still_fails_the_headline(studies, monkeypatch):
    """Against the endpoints' mean a partner at chance makes the Table-1 barrier smaller (reported); the headline,
    the midpoint's distance from the farther endpoint, grows instead: the gate is no longer the only protection."""
    without_gate(monkeypatch, "width-merge-accuracy")
    real = evaluate_claim("width-merge-accuracy", {"study": "s"}, studies["real"], SCALE)
    null = evaluate_claim("width-merge-accuracy", {"study": "s"}, studies["untrained"], SCALE)
    assert null["reported"]["barrier_widest"]["statistic"] < real["reported"]["barrier_widest"]["statistic"] - 0.05
    assert null["statistic"] > real["statistic"] + 0.05, (null["statistic"], real["statistic"])


@pytest.mark.fmnist
def test_convention_margin_of_a_real_claim(studies):
    res = evaluate_claim("width-merge-accuracy", {"study": "s"}, studies["real"], SCALE)
    c = res["criteria"][0]
    assert c["convention"] and c["name"] == "gap_widest"
    lo, hi, flips = keeps_for("<", 0.02, c["ci_low"], c["ci_high"])
    assert c["flips_at"] == pytest.approx(flips) and c["margin"] == pytest.approx(abs(0.02 - flips))
    assert "convention" not in res["criteria"][1]  # the trend's threshold 0 is the paper's
    paper = {p["scale"]: p for p in res["paper_values"]}["MLP, 16x width, MNIST"]
    assert paper["fits_our_study"] and not paper["comparable"]
    assert paper["comparable_reason"] == "paper: dataset mnist vs ours fashion_mnist; width 16 vs ours 1"



@pytest.mark.fmnist
def test_each_study_is_gated_on_its_own(studies):
    """A claim over two studies: the study with a useless model is inconclusive, the other keeps its verdict."""
    tables = {k: make_frame(k, [*studies["real"][k].assign(study="a").to_dict("records"),
                                *studies["untrained"][k].assign(study="b").to_dict("records")])
              for k in ("runs", "barriers")}
    res = evaluate_claim("width-merge-accuracy", {"study": ["a", "b"]}, tables, SCALE, {"a": SCALE, "b": SCALE})
    alone = evaluate_claim("width-merge-accuracy", {"study": "s"}, studies["real"], SCALE)
    assert res["by_study"]["a"]["verdict"] == alone["verdict"] and res["by_study"]["a"]["endpoint_gate"]["passed"]
    assert res["by_study"]["b"]["verdict"] == "inconclusive" and res["verdict"] != "supported"
    gate = res["endpoint_gate"]
    assert {f["study"] for f in gate["failed"]} == {"b"} and gate["checked_models"] == 16


@pytest.mark.fmnist
def test_the_command_line_marks_a_verdict_decided_by_convention(studies, tmp_path):
    from lmcflow.cli import claims_markdown, format_claim

    # the fixture's models train briefly: the convergence gate is relaxed here, the verdict then rests on criteria
    res = evaluate_claim("temperature-calibration", {"study": "s", "max_late_loss_drop": 10.0}, studies["real"], SCALE)
    conv = res["decided_by_convention"]
    assert conv and conv["criterion"] in {c["name"] for c in res["criteria"] if c.get("convention")}
    text = format_claim(claim_row(res))
    assert f"by convention, margin {conv['margin']:.3g}: {conv['criterion']}" in text
    assert "endpoint gate: passed (8 models)" in text
    (tmp_path / "claims").mkdir()
    (tmp_path / "claims/temperature-calibration.json").write_text(json.dumps(res))
    assert f"(by convention, margin {conv['margin']:.3g}" in claims_markdown(tmp_path)
