"""Every claim, with its models B replaced by null partners that a real run trained, is not supported; and the
same-run null controls of the pair claims on the recorded run.

The tables (tests/data/null_tables/, made by tests/data/make_null_tables.py from tests/configs/null_tables*.yaml)
hold, beside every real pair (a, b), the pairs (a, partner of b) with B untrained (seed 1000 + b), trained on
shuffled labels (2000 + b; the coherence study, a regression: shuffled targets) or collapsed (B itself scaled by
0.1, seed 3000 + b; a W-asymmetric layer's offset F with it: W_eff × 0.1), through the pipeline's own jobs. "B
replaced": a pair claim reads the partner pairs as its pairs, and its runs table holds the real models and the
partners (the study a user would have run with useless models B); a per-model claim (``intrinsic-dimension``,
``identifiability-tradeoff``) reads the partners as its models. For each of config/config.yaml's 20 claims and every
kind the test names the criterion that fails, but for ``intrinsic-dimension``, a property of the data whose null is
different in kind (its own test says why), and ``many-model-ensemble``, which merges N real seeds and reads no pairs
(its models pass the endpoint gate first).
"""
from pathlib import Path

import pandas as pd
import pytest
import yaml

from lmcflow.claims import REGISTRY, SUPPORTED, evaluate_claim
from lmcflow.claims.gates import dataset_facts
from lmcflow.claims.nulls import split_partners
from lmcflow.claims.reference import REFERENCE_KIND
from lmcflow.config.partners import PARTNER_SEED_OFFSET, PARTNER_SEP
from lmcflow.tables import read_table

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests/data/null_tables"
BASE_KINDS = ("untrained", "shuffled_labels")  # every recorded study
KINDS = (*BASE_KINDS, "collapsed")  # every recorded identifiability study: the width study's three kinds
# the width study's: also "collapsed" where the recorded tables hold it (tests/data/make_null_tables.py)
WIDTH_KINDS = tuple(sorted(set(read_table(DATA / "width/runs.parquet", "runs").partner) - {"real"},
                           key=["untrained", "shuffled_labels", "collapsed"].index))
# the mechanism columns two headlines read, where the recorded tables hold them
NEW_COLUMNS = {"weak-additivity": "weak_additivity_reference", "cross-transformation-cosine": "own_input_cos_a"}
HAVE = set(read_table(DATA / "width/layer_metrics.parquet", "layer_metrics").dropna(axis=1, how="all").columns)
DEFAULT_CLAIMS = yaml.safe_load((REPO / "config/config.yaml").read_text())["claims"]
# the recorded study that stands in for each default study (its claims' design at CPU-minute scale)
RECORDED_STUDY = {"width": "width", "sigma_f": "sym", "intrinsic_dim": "sym", "coherence": "coh",
                  "sigma_f_tradeoff": "tradeoff"}
CONFIGS = ("tests/configs/null_tables.yaml", "tests/configs/null_tables_identifiability.yaml")
DATA_CFG = {}
for _cfg in CONFIGS:
    _data = yaml.safe_load((REPO / _cfg).read_text())["data"]
    for _group in ("synthetic", "subsets"):
        DATA_CFG.setdefault(_group, {}).update(_data.get(_group) or {})
CLAIM_PARAMS = {"intrinsic-dimension": {"epochs": 20}}  # the recorded sym study trains every model (20 epochs)


def recorded(study: str) -> dict:
    return {p.stem: read_table(p, p.stem) for p in sorted((DATA / study).glob("*.parquet"))}


def scale_of(tables: dict) -> dict:
    names = {d for df in tables.values() if "dataset" in df.columns for d in df["dataset"]}
    return {"data": dataset_facts(names, DATA_CFG)}


def with_null_b(tables: dict, kind: str, per_model: bool) -> dict:
    """The study as if its models B were the ``kind`` partners (see the module docstring), their rows marked real; a
    pair claim's study keeps its untrained partners' rows beside them as what they are (partner ``untrained``): the
    same-run random-feature reference of the width mechanism claims (lmcflow/claims/reference.py), which a user's
    run with useless models B would still have trained."""
    _, nulls = split_partners(tables)
    out = {k: df.assign(partner="real") for k, df in nulls[kind].items()}
    runs = tables["runs"]
    if not per_model:  # the real models A beside the partners B, each under its own seed
        partners = runs[runs.partner == kind].assign(partner="real")
        partners = partners.assign(point=partners.point.str.split(PARTNER_SEP).str[0])
        out["runs"] = pd.concat([runs[runs.partner == "real"], partners], ignore_index=True)
        out = {k: pd.concat([df, tables[k][tables[k].partner == REFERENCE_KIND]], ignore_index=True)
               for k, df in out.items()}
    return out


def evaluate(cid: str, tables: dict) -> dict:
    study = RECORDED_STUDY[DEFAULT_CLAIMS[cid]["study"]]
    return evaluate_claim(cid, {"study": study, **CLAIM_PARAMS.get(cid, {})}, tables, scale_of(tables))


def failing(res: dict) -> list[str]:
    """What keeps a claim from being supported: the endpoint gate, the reason of a claim the data cannot decide,
    and every criterion that is not supported."""
    out = ["endpoint gate"] if res.get("endpoint_gate") and not res["endpoint_gate"]["passed"] else []
    out += ["convergence"] if "not converged" in res.get("reason", "") else []
    return out + [c["name"] for c in res["criteria"] if c["verdict"] != SUPPORTED]


PER_MODEL = {cid for cid, c in REGISTRY.items() if c.unit == "seed"}
# intrinsic-dimension's null is different in kind: test_intrinsic_dimension_is_not_a_pair_property
NO_PAIRS = {"many-model-ensemble"}  # N-way merges of real seeds: no model B to replace
CASES = [(cid, kind) for cid in DEFAULT_CLAIMS if cid not in {"intrinsic-dimension", *NO_PAIRS}
         for kind in (BASE_KINDS if DEFAULT_CLAIMS[cid]["study"] == "width" else KINDS)]


def test_recorded_tables_hold_real_and_partner_rows_of_every_study():
    assert len(DEFAULT_CLAIMS) == 20 and set(DEFAULT_CLAIMS) == set(REGISTRY)
    for study in set(RECORDED_STUDY.values()):
        tables = recorded(study)
        kinds = WIDTH_KINDS if study == "width" else KINDS
        assert tables and all(set(df.partner) == {"real", *kinds} for df in tables.values()), study
        runs = tables["runs"]
        for kind in kinds:
            seeds = set(runs[runs.partner == kind].seed)
            assert seeds == {PARTNER_SEED_OFFSET[kind] + s for s in set(runs[runs.partner == "real"].seed)}
        assert (runs[runs.partner == "untrained"].epochs == 0).all()
        assert (runs[runs.partner == "shuffled_labels"].epochs == runs[runs.partner == "real"].epochs.max()).all()
    assert set(BASE_KINDS) <= set(WIDTH_KINDS)
    runs = recorded("width")["runs"]
    collapsed = runs[runs.partner == "collapsed"]  # B scaled toward zero: a useless model
    if "collapsed" in WIDTH_KINDS:
        assert (collapsed.epochs == runs[runs.partner == "real"].epochs.max()).all() and collapsed.test_acc.max() < 0.3


@pytest.mark.parametrize(("cid", "kind"), CASES)
def test_claim_with_null_partners_as_models_b_is_not_supported(cid, kind):
    res = evaluate(cid, with_null_b(recorded(RECORDED_STUDY[DEFAULT_CLAIMS[cid]["study"]]), kind, cid in PER_MODEL))
    assert res["verdict"] != SUPPORTED
    assert EXPECTED_FAILING[cid] in failing(res), (res["verdict"], res["reason"], failing(res))
    if EXPECTED_FAILING[cid] == "endpoint gate":  # the gate names the partner models
        failed = {f["seed"] for f in res["endpoint_gate"]["failed"]}
        partners = failed & {PARTNER_SEED_OFFSET[kind] + s for s in range(5)}
        assert partners and res["reason"].startswith("endpoint gate")
        if REGISTRY[cid].paper.startswith("Ito"):  # the width study's real models all work: only the partners fail
            assert failed == partners


# what keeps each claim from being supported with null models B (criterion names of lmcflow/claims/*.py): a null
# partner at chance fails the endpoint gate of every claim that reads barriers or merged models (untrained ones too:
# an untrained model among trained ones is checked; the regression task's by R², its fit against the mean predictor)
EXPECTED_FAILING = {
    **{cid: "endpoint gate" for cid, c in REGISTRY.items() if c.gate_endpoints},
    "sigma-f-identity": "normalized_at_matched_max",  # a useless B is not A up to permutation
    # two useless networks: an untrained one has no training to converge, a shuffled-label one is still fitting noise
    # (the broken network's higher loss alone would pass fit_drop: the convergence gate is what stops them)
    "identifiability-tradeoff": "convergence",
}


# the headline criterion of each identifiability pair claim (its first): what a useless partner must fail on its own,
# whatever the endpoint gate says
HEADLINE = {"sigma-f-identity": "normalized_at_matched_max", "sigma-f-unaligned-barrier": "trend",
            "intrinsic-dimension-lmc": "trend", "subspace-coherence": "connected_at_max_nu"}


@pytest.mark.parametrize(("cid", "kind"), [(cid, kind) for cid in HEADLINE for kind in KINDS])
def test_identifiability_pair_claims_fail_their_headline_with_a_useless_partner(cid, kind):
    """With B replaced by a null partner the headline criterion itself is not supported (the endpoint gate aside:
    the statistic must not pass on a pair it cannot be evidence about)."""
    res = evaluate(cid, with_null_b(recorded(RECORDED_STUDY[DEFAULT_CLAIMS[cid]["study"]]), kind, False))
    head = res["criteria"][0] if res["criteria"] else None
    assert head is not None and head["name"] == HEADLINE[cid], (res["reason"], res["criteria"])
    assert head["verdict"] != SUPPORTED, (cid, kind, head["statistic"], head["ci_low"], head["ci_high"])


@pytest.mark.parametrize("study", ["sym", "tradeoff", "coh"])
def test_a_collapsed_identifiability_partner_is_its_model_b_fitting_worse(study):
    """A collapsed partner is real model b, trained as b is (same epochs), then scaled (W_eff × 0.1, F included):
    it fits its training data worse than b does, every one of them (the coherence study, a regression, too: B's
    targets are not its to keep once it is scaled), so its pairs are pairs with a broken B."""
    runs = recorded(study)["runs"]
    real = runs[runs.partner == "real"].set_index(["point", "seed"])
    col = runs[runs.partner == "collapsed"]
    col = col.assign(point=col.point.str.split(PARTNER_SEP).str[0],
                     seed=col.seed - PARTNER_SEED_OFFSET["collapsed"]).set_index(["point", "seed"])
    assert len(col) == len(real) and (col.epochs == real.epochs.loc[col.index]).all()
    assert (col.train_loss > real.train_loss.loc[col.index]).all()


def test_the_identity_objective_of_a_collapsed_layernorm_partner_is_b_s_and_the_control_says_so():
    """Pearson activation matching is scale-invariant and LayerNorm divides the scale out, so a collapsed B's units
    are B's units: the identity objective with a collapsed B is within 0.05 of the real pairs' (the headline is
    not supported with it only as the real one is not). The same-run control is what tells them apart: it does not
    pass, and the claim cannot be supported on a statistic a collapsed partner reproduces."""
    res = evaluate("sigma-f-identity", recorded("sym"))
    rec = {r["kind"]: r for r in res["null_controls"]}["collapsed"]
    assert abs(rec["real"]["statistic"] - rec["null"]["statistic"]) < 0.05
    assert rec["verdict"] != SUPPORTED and res["verdict"] != SUPPORTED


@pytest.mark.parametrize("cid", list(HEADLINE))
def test_the_recorded_run_runs_the_identifiability_controls(cid):
    """On the recorded study (real and partner pairs) every identifiability pair claim runs its same-run control
    for every kind, on the headline's real statistic."""
    res = evaluate(cid, recorded(RECORDED_STUDY[DEFAULT_CLAIMS[cid]["study"]]))
    recs = {r["kind"]: r for r in res["null_controls"]}
    assert set(recs) == set(KINDS) and all(r["status"] == "run" for r in recs.values()), recs
    assert all(r["statistic_name"] == HEADLINE[cid] for r in recs.values())


def test_intrinsic_dimension_is_not_a_pair_property():
    """Swap costs against the data's intrinsic dimension k measure the input subspace a layer sees, not what a
    network learned: with shuffled labels (the same inputs) the claim is still supported, and untrained models are
    the claim's own default arm. Its null is different in kind (data without the k structure); the recorded partner
    tables are not one, which this test records so that a change of that fact is noticed."""
    tables = recorded("sym")
    shuffled = evaluate("intrinsic-dimension", with_null_b(tables, "shuffled_labels", True))
    assert shuffled["verdict"] == SUPPORTED
    untrained = evaluate("intrinsic-dimension", with_null_b(tables, "untrained", True))
    assert untrained["verdict"] != SUPPORTED and "no swap costs of models trained 20 epochs" in untrained["reason"]


WIDTH_CLAIMS = [cid for cid in DEFAULT_CLAIMS if DEFAULT_CLAIMS[cid]["study"] == "width" and cid not in NO_PAIRS
                and REGISTRY[cid].paper.startswith("Ito")]
RETIRED = {"active-neuron-overlap"}  # decides nothing (unit identity is arbitrary between unaligned models)
# the headline criterion of every width claim (its first): with B a null partner it is not supported itself
WIDTH_HEADLINE = {"width-merge-accuracy": "gap_widest", "temperature-calibration": "calibrated_gap_widest",
            "weight-matching-no-gain": "gain_widest", "random-permutation": "sensitivity_widest",
            "weight-decay": "gap_difference", "lewc": "gain_over_random_features",
            "weak-additivity": "net_excess_over_random_features", "reciprocal-orthogonality": "ratio_widest",
            "low-rank": "fraction_of_random", "cross-transformation-cosine": "own_input_cos_over_random_features",
            "logit-norm-decay": "exponent_error"}
# the claims whose headline is their statistic on the real pairs minus the same on pairs with an untrained partner
REFERENCED = {cid for cid in WIDTH_HEADLINE if REGISTRY[cid].reference_partner == REFERENCE_KIND}
# where the paper's statement does not make B take part, a partner may meet the headline: low rank is a property of
# each model, and the effective rank is scale-invariant, so a collapsed B (B scaled) is exactly as low-rank as B
B_NEED_NOT_TAKE_PART = {("low-rank", "collapsed")}


@pytest.mark.parametrize(("cid", "kind"), [(c, k) for c in WIDTH_CLAIMS if c not in RETIRED for k in WIDTH_KINDS
                                           if (c, k) not in B_NEED_NOT_TAKE_PART])
def test_width_headline_is_not_supported_with_null_partners_as_models_b(cid, kind):
    """The endpoint gate aside, the headline criterion itself lands on its failing side (or cannot be told from its
    threshold) when B is untrained, trained on shuffled labels or collapsed toward zero."""
    res = evaluate(cid, with_null_b(recorded("width"), kind, False))
    if NEW_COLUMNS.get(cid, "lewc_cos") not in HAVE:  # tables recorded before the column: no headline, says why
        assert res["criteria"] == [] and "rerun the mechanism jobs" in res["reason"]
        return
    head = res["criteria"][0]
    assert head["name"] == WIDTH_HEADLINE[cid]
    assert head["verdict"] != SUPPORTED, (cid, kind, head["statistic"], head["ci_low"], head["ci_high"])
    if cid in REFERENCED:  # B is the reference itself (exactly 0), or worse than random features (below 0)
        assert head["verdict"] == "not_supported" and head["ci_high"] <= 0, (cid, kind, head["statistic"])
        assert head["statistic"] == 0.0 if kind == REFERENCE_KIND else head["statistic"] < 0


def test_every_width_claim_names_its_headline():
    assert set(WIDTH_HEADLINE) == set(WIDTH_CLAIMS) - RETIRED
    res = evaluate("active-neuron-overlap", recorded("width"))
    assert res["criteria"] == [] and "retired" in res["reason"]


@pytest.mark.parametrize("cid", sorted(c for c in set(WIDTH_CLAIMS) - RETIRED
                                       if NEW_COLUMNS.get(c, "lewc_cos") in HAVE))
def test_the_recorded_run_decides_every_width_claim_with_its_controls(cid):
    res = evaluate(cid, recorded("width"))
    recs = {r["kind"]: r for r in res["null_controls"]}
    assert set(recs) == set(WIDTH_KINDS) and all(r["status"] == "run" for r in recs.values())
    controls = {c["name"]: c for c in res["criteria"] if c["kind"] == "control"}
    assert {f"real_vs_{k}" for k in WIDTH_KINDS} <= set(controls)
    # one-sided, in the headline's direction
    head = res["criteria"][0]
    for k in WIDTH_KINDS:
        c = controls[f"real_vs_{k}"]
        want = {">": "ahead>", "<": "ahead<"}.get(head["side"])
        assert c["side"] == want if want else c["side"] in ("ahead>", "ahead<")
    if res["verdict"] == SUPPORTED:
        assert all(controls[f"real_vs_{k}"]["verdict"] == SUPPORTED for k in WIDTH_KINDS)
    for r in recs.values():  # the real statistic is the headline's: the partners cover every point
        assert r["real"]["statistic"] == pytest.approx(res["statistic"])
        assert r["difference"]["statistic"] == pytest.approx(r["real"]["statistic"] - r["null"]["statistic"])


def test_recorded_controls_on_the_recorded_run():
    """On the recorded run a useless B puts the merge far from one endpoint: the midpoint's distance from the farther
    endpoint is large for every partner kind (the Table-1 barrier, against the endpoints' mean, would be strongly
    negative and pass), and the null alone fails the headline criterion."""
    wma = {r["kind"]: r for r in evaluate("width-merge-accuracy", recorded("width"))["null_controls"]}
    assert set(wma) == set(WIDTH_KINDS)
    assert all(r["null"]["statistic"] > 0.3 and r["difference"]["ci_high"] < 0 for r in wma.values())
    assert all(r["null_verdict_on_criterion"] == "not_supported" for r in wma.values())


# --------------------------------------------------------------------------- the control's mechanics
def as_partner(df: pd.DataFrame, kind: str, **values) -> pd.DataFrame:
    """``df``'s rows as pairs (a, partner of b) of a ``kind`` partner: seed_b offset, point renamed, values set."""
    return df.assign(partner=kind, seed_b=df.seed_b + PARTNER_SEED_OFFSET[kind],
                     point=df.point + PARTNER_SEP + kind, **values)


CLAIM = "reciprocal-orthogonality"  # headline: the cross-norm ratio at the widest width, "<" 0.5
RATIO = ("cross_ratio_a", "cross_ratio_b")


def synthetic(null_value=None, widths=None, **params):
    """The claim's power case (holds) with an untrained partner's pairs: its cross-norm ratios ``null_value``,
    ("shift", x): the real pairs' + x, or "same"."""
    from tests.claim_tables import verdict
    from tests.test_claim_power import CASES as POWER

    lm = POWER[CLAIM](True)["layer_metrics"]
    tables = {"layer_metrics": lm}
    if null_value is not None:
        null = as_partner(lm if widths is None else lm[lm.width.isin(widths)], "untrained")
        if isinstance(null_value, tuple):
            null = null.assign(**{c: null[c] + null_value[1] for c in RATIO})
        elif null_value != "same":
            null = null.assign(**{c: null_value for c in RATIO})
        tables = {"layer_metrics": pd.concat([lm, null], ignore_index=True)}
    return verdict(CLAIM, tables, **params)


def test_control_compares_the_headline_with_the_same_statistic_on_partner_pairs():
    res = synthetic(null_value=3.0)  # a partner whose weights read A's input as much as its own: a large ratio
    (rec,) = res["null_controls"]
    assert rec["kind"] == "untrained" and rec["status"] == "run" and rec["statistic_name"] == "ratio_widest"
    assert rec["real"]["statistic"] == pytest.approx(res["statistic"])
    assert rec["null"]["statistic"] == pytest.approx(3.0)
    assert rec["difference"]["statistic"] == pytest.approx(res["statistic"] - 3.0)
    assert rec["difference"]["ci_high"] < 0 and rec["verdict"] == SUPPORTED
    assert rec["null_verdict_on_criterion"] == "not_supported"  # the null alone fails the headline
    assert res["verdict"] == SUPPORTED
    control = next(c for c in res["criteria"] if c["name"] == "real_vs_untrained")
    assert control["kind"] == "control" and control["side"] == "ahead<"
    assert {"control": "untrained partners", "test": "real_vs_untrained", "verdict": SUPPORTED} in res["controls"]


def test_a_statistic_that_a_null_partner_reproduces_leaves_the_claim_inconclusive():
    res = synthetic(null_value="same")
    (rec,) = res["null_controls"]
    assert rec["difference"]["statistic"] == pytest.approx(0.0, abs=1e-12)
    assert rec["verdict"] == "inconclusive" and res["verdict"] == "inconclusive"
    assert failing(res) == ["real_vs_untrained"]


def test_a_null_partner_better_than_the_real_pairs_in_the_papers_direction_does_not_pass_the_control():
    """One-sided: a partner whose ratio is smaller than the real pairs' by far more than δ fails the control (an
    "apart" control, |real − null| > δ, passed it)."""
    base = synthetic()
    delta = 0.1 * abs(base["criteria"][0]["statistic"] - 0.5)
    better = synthetic(null_value=("shift", -4 * delta))
    (rec,) = better["null_controls"]
    assert rec["difference"]["ci_low"] > delta and rec["verdict"] == "inconclusive"
    assert better["verdict"] == "inconclusive" and failing(better) == ["real_vs_untrained"]


def test_a_null_partner_within_the_minimum_distance_leaves_the_claim_inconclusive():
    """real − null must lie below −δ, δ = null_min_share (0.1) × the real estimate's distance from its threshold: a
    partner worse than the real pairs by a small, even significant, amount does not let it pass."""
    base = synthetic()
    head = base["criteria"][0]
    delta = 0.1 * abs(head["statistic"] - head["threshold"])
    assert delta > 0 and base["verdict"] == SUPPORTED
    near = synthetic(null_value=("shift", 0.5 * delta))  # real − null = −δ/2 in every seed: significant, too close
    (rec,) = near["null_controls"]
    assert rec["min_distance"] == pytest.approx(delta)
    assert rec["difference"]["ci_high"] < 0 and rec["verdict"] == "inconclusive"
    assert near["verdict"] == "inconclusive" and failing(near) == ["real_vs_untrained"]
    control = next(c for c in near["criteria"] if c["name"] == "real_vs_untrained")
    assert control["threshold"] == pytest.approx(-delta) and control["convention"] is True
    assert control["flips_at"] == pytest.approx(-0.5 * delta, rel=0.3)  # the δ beyond which it would pass
    far = synthetic(null_value=("shift", 2 * delta))
    assert far["null_controls"][0]["verdict"] == SUPPORTED and far["verdict"] == SUPPORTED
    assert synthetic(null_value=("shift", 0.5 * delta), null_min_share=0.0)["verdict"] == SUPPORTED


def test_null_min_share_must_be_a_share():
    from lmcflow.claims.nulls import check_null_params
    from lmcflow.config import ConfigError

    for bad in (-0.1, 1.0, "0.1", True):
        with pytest.raises(ConfigError, match="claims.lewc.null_min_share"):
            check_null_params("lewc", {"null_min_share": bad}, "s", [])
    check_null_params("lewc", {"null_min_share": 0.0}, "s", [])
    assert check_null_params in REGISTRY["lewc"].requires and REGISTRY["lewc"].defaults["null_min_share"] == 0.1
    assert "null_min_share" not in REGISTRY["intrinsic-dimension"].defaults  # per-model claims have no partner


def test_without_partner_rows_the_control_is_not_run_and_says_so():
    from lmcflow.claims import claim_row

    res = synthetic()
    assert res["null_controls"] == [] and res["verdict"] == SUPPORTED
    assert claim_row(res)["null_controls"] == "not run: no null partners at the claim's points"
    partial = synthetic(null_value=3.0, widths=[4.0])  # one width: the trend statistic cannot be formed
    (rec,) = partial["null_controls"]
    assert rec["status"] == "not run" and "at ≥ 2 widths" in rec["reason"]
    assert partial["verdict"] == SUPPORTED and not any(c["name"].startswith("real_vs_") for c in partial["criteria"])
    assert "untrained: not run" in claim_row(partial)["null_controls"]


def test_the_real_statistic_is_taken_over_the_points_the_partners_cover():
    from tests.claim_tables import verdict
    from tests.test_claim_power import CASES as POWER

    lm = POWER[CLAIM](True)["layer_metrics"]
    lm = lm.assign(point="w" + lm.width.astype(str))  # one point per width
    covered = lm[lm.width.isin([0.25, 1.0])]
    null = as_partner(covered, "shuffled_labels", cross_ratio_a=3.0, cross_ratio_b=3.0)
    res = verdict(CLAIM, {"layer_metrics": pd.concat([lm, null], ignore_index=True)})
    (rec,) = res["null_controls"]
    assert rec["points"] == ["w0.25", "w1.0"]
    # the ratio at the widest covered width (1.0: 0.5), not at the study's widest (4.0: 0.3)
    assert rec["real"]["statistic"] == pytest.approx(0.5, abs=0.01)
    assert res["statistic"] == pytest.approx(0.3, abs=0.01)


def test_the_endpoint_gate_checks_the_real_models_only():
    from tests.claim_tables import working_runs
    from tests.test_claim_power import CASES as POWER

    lm = POWER[CLAIM](True)["layer_metrics"]
    runs = working_runs({"layer_metrics": lm})
    chance = runs.assign(partner="untrained", seed=runs.seed + 1000, test_acc=0.1,
                         point=runs.point + PARTNER_SEP + "untrained")
    tables = {"layer_metrics": pd.concat([lm, as_partner(lm, "untrained", cross_ratio_a=3.0, cross_ratio_b=3.0)],
                                         ignore_index=True),
              "runs": pd.concat([runs, chance], ignore_index=True)}
    res = evaluate_claim(CLAIM, {"study": "s"}, tables, {})
    assert res["endpoint_gate"]["passed"] and res["endpoint_gate"]["checked_models"] == len(runs)
    assert res["convergence_gate"]["passed"] and res["verdict"] == SUPPORTED


# --------------------------------------------------------------------------- the random-feature reference
REFERENCE_PARAM = {"lewc": "min_gain_over_random_features",
                   "weak-additivity": "min_net_excess_over_random_features",
                   "cross-transformation-cosine": "min_own_input_cos_over_random_features"}
SHARE_OF_GAP = ("lewc", "cross-transformation-cosine")
REFERENCE_COLUMNS = {"lewc": ("lewc_cos",), "weak-additivity": ("weak_additivity",),
                     "cross-transformation-cosine": ("own_input_cos_a", "own_input_cos_b")}


def with_reference(cid: str, shift: float | None) -> dict:
    """The claim's power case (holds) with its real pairs only, and beside them (``shift`` not None) the same pairs at
    the widest width with an untrained partner B whose statistic columns are the real ones + ``shift``."""
    from tests.test_claim_power import CASES as POWER

    lm = POWER[cid](True)["layer_metrics"]
    real = lm[lm.partner == "real"]
    if shift is None:
        return {"layer_metrics": real}
    widest = real[real.width == real.width.max()]
    partner = as_partner(widest, REFERENCE_KIND, **{c: widest[c] + shift for c in REFERENCE_COLUMNS[cid]})
    return {"layer_metrics": pd.concat([real, partner], ignore_index=True)}


@pytest.mark.parametrize("cid", sorted(REFERENCE_COLUMNS))
def test_the_headline_passes_real_pairs_above_the_random_feature_reference_only(cid):
    """Headline: the statistic on the real pairs against the same on pairs (A, untrained B), paired by seed: LEWC's
    gain and the own-input cosine as the share of the reference's gap to 1 that the real pairs close (> ½), the net
    excess as a difference (> 0). Real pairs well above the reference pass it; real pairs equal to it (B does no more
    than random features) fail it, every other criterion unchanged; a share claim's real pairs only just above it
    (a B part-way from random features) fail it too; without untrained rows at the widest width the claim says what
    to add."""
    from tests.claim_tables import verdict

    assert REGISTRY[cid].reference_partner == REFERENCE_KIND
    better = verdict(cid, with_reference(cid, -0.3))
    head = better["criteria"][0]
    threshold = 0.5 if cid in SHARE_OF_GAP else 0.0
    assert head["name"] == WIDTH_HEADLINE[cid] and head["side"] == ">" and head["threshold"] == threshold
    assert head["source"].startswith("same-run: random features") and head["verdict"] == SUPPORTED
    assert better["thresholds"][REFERENCE_PARAM[cid]] == {"value": threshold, "kind": "same-run",
                                                           "source": head["source"].removeprefix("same-run: ")}
    assert better["verdict"] == SUPPORTED
    partway = verdict(cid, with_reference(cid, -0.01))["criteria"][0]
    assert partway["verdict"] == ("not_supported" if cid in SHARE_OF_GAP else SUPPORTED), partway
    equal = verdict(cid, with_reference(cid, 0.0))
    assert equal["criteria"][0]["statistic"] == 0.0 and equal["criteria"][0]["verdict"] == "not_supported"
    assert equal["verdict"] == "not_supported"
    assert [c["verdict"] for c in equal["criteria"][1:3]] == [c["verdict"] for c in better["criteria"][1:3]]
    alone = verdict(cid, with_reference(cid, None))
    assert alone["verdict"] == "inconclusive" and alone["criteria"] == []
    assert "untrained partner B at the widest width 4" in alone["reason"]
    assert "analysis.null_partners (kinds: [untrained], at: {model.width: [4]})" in alone["reason"]


def test_each_null_kind_is_measured_against_the_random_feature_reference():
    """The null controls read the reference beside each kind's pairs: an untrained kind is the reference itself (its
    headline exactly 0), a shuffled-label one below it (negative)."""
    from tests.claim_tables import verdict

    tables = with_reference("cross-transformation-cosine", -0.3)
    lm = tables["layer_metrics"]
    real = lm[lm.partner == "real"]
    shuffled = as_partner(real, "shuffled_labels", own_input_cos_a=0.3, own_input_cos_b=0.3)
    res = verdict("cross-transformation-cosine", {"layer_metrics": pd.concat([lm, shuffled], ignore_index=True)})
    recs = {r["kind"]: r for r in res["null_controls"]}
    assert recs["shuffled_labels"]["status"] == "run"
    assert recs["shuffled_labels"]["null"]["statistic"] < 0
    assert recs["shuffled_labels"]["null_verdict_on_criterion"] == "not_supported"
    assert res["verdict"] == SUPPORTED
