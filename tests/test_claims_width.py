"""Width-paper claims: arms and definitions they read, Table 1 beside ours, several Table-1 studies at once,
and (on small real models, through lmcflow's own mechanism code) unrelated networks fail the mechanism
claims that real pairs pass."""
import itertools

import pandas as pd
import pytest
import torch

from lmcflow.config.partners import PARTNER_SEED_OFFSET, PARTNER_SEP
from tests.claim_tables import (
    DEFAULT_WD,
    WEAK_WD,
    WIDTHS,
    Noise,
    pair_rows,
    table,
    verdict,
    working_runs,
)
from tests.test_claim_power import lewc as lewc_tables
from tests.test_claim_power import weight_matching_no_gain as wm_tables


def test_mechanism_claims_read_only_their_weight_decay_arm():
    good = lewc_tables(True)["layer_metrics"]
    weak = lewc_tables(False)["layer_metrics"].assign(weight_decay=WEAK_WD)
    both = {"layer_metrics": table("layer_metrics", good.to_dict("records") + weak.to_dict("records"))}
    res = verdict("lewc", both)
    gain = {c["name"]: c for c in res["criteria"]}["gain_over_shuffled"]
    assert res["verdict"] == "supported" and gain["statistic"] == pytest.approx(0.98, abs=0.01)
    assert verdict("lewc", both, weight_decay=WEAK_WD)["verdict"] == "not_supported"


def test_width_merge_accuracy_reads_the_merge_against_both_endpoints():
    """The headline is the midpoint's distance from the farther endpoint; the Table-1 barrier (against the
    endpoints' mean) is reported. Endpoints 3 points apart make the distance 1.5 points larger than the barrier."""
    from tests.test_claim_power import by_width, paths

    curve = by_width((0.2, 0.05, 0.005))
    res = verdict("width-merge-accuracy", {"interpolation": table("interpolation", paths(curve))})
    assert res["verdict"] == "supported" and res["statistic"] == pytest.approx(0.005, abs=0.003)
    assert res["reported"]["barrier_widest"]["statistic"] == pytest.approx(0.005, abs=0.003)
    apart = [{**r, "error": r["error"] + (0.03 if r["lam"] == 1.0 else 0.015 if r["lam"] == 0.5 else 0.0)}
             for r in paths(curve)]
    far = verdict("width-merge-accuracy", {"interpolation": table("interpolation", apart)})
    assert far["statistic"] == pytest.approx(0.02, abs=0.003) and far["verdict"] != "supported"
    assert far["reported"]["barrier_widest"]["statistic"] == pytest.approx(0.005, abs=0.003)
    paper = {p["scale"]: p for p in res["paper_values"]}
    assert paper["MLP, 16x width, MNIST"]["value"] == 0.0052
    assert paper["MLP, 16x width, MNIST"]["ours"]["name"] == "barrier_widest"


def test_weight_matching_no_gain_reads_every_table1_study():
    """The Table-1 claims may read several studies: each is decided, then the verdicts are combined."""
    helps = wm_tables(False)["interpolation"].assign(study="mlp", arch="mlp")   # still gains 2 points
    hurts = wm_tables(True)["interpolation"].assign(study="vgg", arch="vgg11")  # the paper's MLP row
    tables = {"interpolation": table("interpolation", helps.to_dict("records") + hurts.to_dict("records"))}
    tables["runs"] = working_runs(tables)
    from lmcflow.claims import evaluate_claim

    scales = {"mlp": {"arch": ["mlp"]}, "vgg": {"arch": ["vgg11"]}}
    res = evaluate_claim("weight-matching-no-gain", {"study": ["vgg", "mlp"]}, tables, scales["vgg"], scales)
    assert res["studies"] == ["vgg", "mlp"] and res["verdict"] == "not_supported"  # combined, not the first's
    assert res["by_study"]["mlp"]["verdict"] == "not_supported" and res["by_study"]["vgg"]["verdict"] == "supported"
    mlp_paper = [p for p in res["by_study"]["mlp"]["paper"] if p["fits_our_study"]]
    assert [p["scale"] for p in mlp_paper] == ["MLP, 16x width, MNIST"]
    assert mlp_paper[0]["value"] == pytest.approx(0.0055)
    vgg = {"interpolation": table("interpolation", hurts.to_dict("records"))}
    single = evaluate_claim("weight-matching-no-gain", {"study": "vgg"}, {**vgg, "runs": working_runs(vgg)},
                            scales["vgg"])
    assert single["verdict"] == "supported" and "by_study" not in single


def test_low_rank_counts_the_less_low_rank_model_of_a_pair():
    """A pair is as low-rank as its less low-rank model: a full-rank B hides A's low rank."""
    def rows(b_rank):
        return pair_rows({"width": WIDTHS, "weight_decay": [DEFAULT_WD, WEAK_WD], "layer": [2], "lam_paper": [0.5]},
                         lambda width, weight_decay, **_: {
                             "erank_rel_a": {DEFAULT_WD: 0.3, WEAK_WD: 0.5}[weight_decay] - 0.05 * WIDTHS.index(width),
                             "erank_rel_b": b_rank, "rank99_frac_a": 0.5, "rank99_frac_b": 0.5,
                             "erank_rel_random": 0.8}, Noise(0.001, 0.001))
    assert verdict("low-rank", {"layer_metrics": table("layer_metrics", rows(0.0))})["verdict"] == "supported"
    assert verdict("low-rank", {"layer_metrics": table("layer_metrics", rows(0.8))})["verdict"] != "supported"


def test_lewc_reports_the_perturbed_a_comparison_without_deciding_by_it():
    """The paper claims LEWC holds, not that it beats a random step of B's size (a wide network keeps A's features
    under one): where that step gives a slightly higher cosine, as in the default run, LEWC is still decided by its
    level, the shuffled null, LLFC and the trend, and the comparison is reported beside them."""
    tables = lewc_tables(True)
    lm = tables["layer_metrics"].assign(lewc_cos_perturbed=lambda d: d.lewc_cos + 0.005)
    res = verdict("lewc", {"layer_metrics": lm})
    assert res["verdict"] == "supported"
    assert "lewc_minus_perturbed" not in {t["name"] for t in res["criteria"]}
    assert res["reported"]["lewc_minus_perturbed"]["statistic"] == pytest.approx(-0.005, abs=1e-3)


def test_logit_norm_decay_needs_layers_without_normalisation():
    from lmcflow.claims import REGISTRY
    from lmcflow.config import ConfigError, Point

    claim_ = REGISTRY["logit-norm-decay"]
    plain = [Point("s", f"w{w}", "cifar10", [0, 1], model={"arch": "vgg11", "width": w}) for w in (1.0, 2.0)]
    claim_.check_config("logit-norm-decay", {"study": "s"}, "s", {"seeds": [0, 1], "sweep": {"model.width": [1, 2]}},
                        plain)
    bn = [Point("s", f"w{w}", "cifar10", [0, 1], model={"arch": "vgg11", "width": w, "norm": "batchnorm"})
          for w in (1.0, 2.0)]
    with pytest.raises(ConfigError, match="logit decay .* assumes layers without normalisation"):
        claim_.check_config("logit-norm-decay", {"study": "s"}, "s",
                            {"seeds": [0, 1], "sweep": {"model.width": [1, 2]}}, bn)


def test_logit_norm_decay_is_exact_for_a_copy_in_disjoint_units(small_data):
    """B computes A's function on the other half of the units, without biases: LEWC holds exactly, the merged logits
    are (λ^D + (1−λ)^D) z_A, and the exponent fitted to evaluate_path's logit norms is D = depth + 1."""
    from lmcflow.claims.width import fitted_decay_exponent, lewc_logit_ratio
    from lmcflow.config import lambda_grid
    from lmcflow.merging import evaluate_path
    from lmcflow.models import ModelSpec, build_model
    from lmcflow.training import train

    depth, half = 2, 8
    torch.manual_seed(0)  # the initial weights: the fitted β must stay inside its search bounds at every λ
    small = build_model(ModelSpec("mlp", (20,), 4, width=1.0, depth=depth, base_width=half, bias=False))
    train(small, small_data, {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0, "epochs": 3,
                              "batch_size": 64, "schedule": "constant", "precision": "fp32"}, 0, torch.device("cpu"))
    spec = ModelSpec("mlp", (20,), 4, width=1.0, depth=depth, base_width=2 * half, bias=False)
    a, b = build_model(spec), build_model(spec)
    with torch.no_grad():  # the trained network on units 0..7 (A) and on units 8..15 (B)
        for la, lb, ls in zip([*a.layers, a.head], [*b.layers, b.head], [*small.layers, small.head], strict=True):
            la.weight.zero_()
            lb.weight.zero_()
            rows_a = slice(None) if ls is small.head else slice(0, half)
            rows_b = slice(None) if ls is small.head else slice(half, 2 * half)
            cols_a = slice(None) if ls is small.layers[0] else slice(0, half)
            cols_b = slice(None) if ls is small.layers[0] else slice(half, 2 * half)
            la.weight[rows_a, cols_a] = ls.weight
            lb.weight[rows_b, cols_b] = ls.weight
    rows = evaluate_path(build_model(spec), a.state_dict(), b.state_dict(), small_data, lambda_grid(11))
    test = [r for r in rows if r["split"] == "test"]
    lam = [r["lam"] for r in test]
    ratio = [r["logit_norm"] / test[0]["logit_norm"] for r in test]
    assert ratio == pytest.approx(list(lewc_logit_ratio(lam, depth + 1)), rel=1e-5)
    assert fitted_decay_exponent(lam, ratio) == pytest.approx(depth + 1, abs=1e-3)
    # calibration undoes it: the fitted β of the merged model scales its logits back to the endpoints' level
    mid = test[5]
    assert 0 < test[0]["beta"] < mid["beta"] < 1000  # inside the search bounds (log β ∈ [−7, 7])
    assert mid["loss"] > test[0]["loss"] + 0.05 and mid["error"] == test[0]["error"]  # same argmax, worse loss
    assert mid["beta"] * mid["logit_norm"] == pytest.approx(test[0]["beta"] * test[0]["logit_norm"], rel=1e-3)
    assert mid["calibrated_loss"] == pytest.approx(test[0]["calibrated_loss"], rel=1e-4)


# --------------------------------------------------------------------------- unrelated networks must fail
N_SEEDS = 4
MECH_WIDTHS = (0.25, 1.0)
MECHANISM_CLAIMS = ("lewc", "weak-additivity", "reciprocal-orthogonality", "low-rank", "cross-transformation-cosine",
                    "active-neuron-overlap")
SHARE_OF_GAP_HEADLINES = ("lewc", "cross-transformation-cosine")


@pytest.fixture(scope="module")
def pair_tables(fmnist_path):
    """layer_metrics of real pairs (A_i, B_j), and of null pairs whose B is untrained or trained on shuffled
    labels, for 4 seeds × 2 widths × 2 weight-decay arms (small MLPs on 1,500 Fashion-MNIST images)."""
    from lmcflow.checkpoints import init_model
    from lmcflow.data import Dataset, load_dataset
    from lmcflow.mechanism import layer_metrics
    from lmcflow.models import ModelSpec
    from lmcflow.seeding import generator
    from lmcflow.training import train

    full = load_dataset(fmnist_path)
    x, y = full.x["train"][:1500], full.y["train"][:1500]
    shuffled_y = y[torch.randperm(len(y), generator=generator("test-shuffled-labels"))]

    def data(labels):
        return Dataset({"train": x, "val": full.x["val"][:10], "test": full.x["test"][:10]},
                       {"train": labels, "val": full.y["val"][:10], "test": full.y["test"][:10]}, full.meta)

    x_mech = full.x["test"][:300]
    cpu = torch.device("cpu")

    def model(width, wd, seed, labels=None, untrained=False):
        spec = ModelSpec(arch="mlp", in_shape=(1, 28, 28), num_classes=10, width=width, depth=2, base_width=128)
        m = init_model(spec, seed)
        if not untrained:
            cfg = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": wd, "epochs": 6,
                   "batch_size": 128, "schedule": "cosine", "precision": "fp32"}
            train(m, data(y if labels is None else labels), cfg, seed, cpu)
        return m

    rows = {"real": [], "untrained": [], "shuffled labels": []}
    for width, wd in itertools.product(MECH_WIDTHS, (DEFAULT_WD, WEAK_WD)):
        real = [model(width, wd, s) for s in range(N_SEEDS)]
        nulls = {"untrained": [model(width, wd, 100 + s, untrained=True) for s in range(N_SEEDS)],
                 "shuffled labels": [model(width, wd, 200 + s, labels=shuffled_y) for s in range(N_SEEDS)]}
        for a, b in itertools.combinations(range(N_SEEDS), 2):
            for kind, model_b in (("real", real[b]), *((k, v[b]) for k, v in nulls.items())):
                for r in layer_metrics(real[a], model_b, x_mech, [0.25, 0.5, 0.75]):
                    r["weight_key"] = r.pop("weight")
                    rows[kind].append({**r, "width": width, "weight_decay": wd, "seed_a": a, "seed_b": b})
    return {kind: {"layer_metrics": table("layer_metrics", r)} for kind, r in rows.items()}


def with_reference(pair_tables: dict, kind: str) -> dict:
    """The ``kind`` pairs as a study's pairs, with the untrained pairs beside them as its untrained partners (the
    width mechanism claims' same-run random-feature reference: lmcflow/claims/reference.py)."""
    lm, untrained = pair_tables[kind]["layer_metrics"], pair_tables["untrained"]["layer_metrics"]
    partners = untrained.assign(partner="untrained", seed_b=untrained.seed_b + PARTNER_SEED_OFFSET["untrained"],
                                point=untrained.point + PARTNER_SEP + "untrained")
    return {"layer_metrics": pd.concat([lm, partners], ignore_index=True)}


def _real_better(real: dict, null_test: dict) -> bool:
    """The real pairs pass ``null_test`` or are strictly better on its statistic."""
    r = {t["name"]: t for t in real["criteria"]}[null_test["name"]]
    sign = 1 if null_test["side"] == ">" else -1
    return r["verdict"] == "supported" or sign * (r["statistic"] - null_test["statistic"]) > 0


@pytest.mark.fmnist
@pytest.mark.parametrize("cid", MECHANISM_CLAIMS)
def test_unrelated_networks_fail_the_mechanism_claims(pair_tables, cid):
    """At this scale (1,500 images, ≤ 128 units) the real pairs are not supported either (LEWC: its trend over
    two widths is not resolved; reciprocal orthogonality: cross ratio 0.6 > 0.5; low rank: the rank rises with
    width): then the null pairs must be strictly worse on a test they fail. Weak additivity is the exception:
    no pair, real or null, beats the shuffled-pairing baseline here (measured gains −0.008, −0.0005, +0.0004),
    so only 'the null pairs are not supported' is asserted for it. Active-neuron overlap says the overlap is at
    chance, which an unrelated partner meets by construction: the endpoint gate (a partner that is not a working
    model leaves the claim inconclusive) is what excludes it, asserted here. LEWC's and the cross-transformation's
    headlines (the share of what random features leave to 1 that B closes) put both null partners on their failing
    side even here, where a shuffled-label B six epochs from its initialisation is part-way from random features
    (0.37 and 0.31 against 0.5 on an Intel Xeon; the real pairs 0.90 and 0.80)."""
    real = verdict(cid, with_reference(pair_tables, "real"))
    for kind in ("untrained", "shuffled labels"):
        if cid == "active-neuron-overlap":
            continue  # its gate: tests/test_claim_gates.py (every gated claim)
        null = verdict(cid, with_reference(pair_tables, kind))
        assert null["verdict"] != "supported", (cid, kind, null["criteria"])
        if cid in SHARE_OF_GAP_HEADLINES:
            head = null["criteria"][0]
            assert head["statistic"] < head["threshold"], (cid, kind, head)
        if real["verdict"] != "supported" and cid != "weak-additivity":
            # at this tiny scale the real pairs do not pass either: then some test the null fails must be
            # one the real pairs pass, or the real pairs must be strictly better on it
            failing = [t for t in null["criteria"] if t["verdict"] != "supported"]
            assert any(_real_better(real, t) for t in failing), (cid, kind, real["criteria"], null["criteria"])


