"""The report's landing page (lmcflow.jobs.report.run_report_front_page): every verdict, ours beside the paper's,
with links to the study's figures, one short table row per claim that renders as reStructuredText."""
import docutils.core

from lmcflow.claims.core import replication_columns
from lmcflow.claims.regime import regime_columns
from lmcflow.jobs.report import run_report_front_page
from lmcflow.tables import write_table

ROWS = [
    {"claim_id": "width-merge-accuracy", "paper": "Ito et al.", "statement": "s", "study": "width",
     "verdict": "not_supported", "reason": "", "statistic_name": "midpoint error barrier", "statistic": 0.0281,
     "ci_low": 0.0219, "ci_high": 0.0343, "ci_method": "jackknife", "n_seeds": 5, "n_pairs": 10, "controls": "",
     "paper_quantity": "plain-average midpoint error barrier", "paper_value": 0.0052,
     "paper_scale": "MLP, 16x width, MNIST", "our_value": 0.0281, "scale": "x1",
     "paper_comparable": "not comparable: paper: dataset mnist vs ours fashion_mnist; width 16 vs ours 1",
     "endpoint_gate": "passed (25 models)", "convention_margin": "", "null_controls": "untrained: real 0.0281 vs "
     "null -0.38, difference 0.408 [0.39, 0.43] supported", "null_untrained": -0.38,
     "null_shuffled_labels": float("nan"), "null_collapsed": float("nan"), **replication_columns(None),
     **regime_columns({})},
    {"claim_id": "sigma-f-identity", "paper": "Bürgin et al.", "statement": "s", "study": "sigma_f",
     "verdict": "inconclusive", "reason": "too few seeds", "statistic_name": "normalized identity objective",
     "statistic": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "ci_method": "", "n_seeds": 3,
     "n_pairs": 3, "controls": "", "paper_quantity": "", "paper_value": float("nan"), "paper_scale": "",
     "our_value": float("nan"), "scale": "", "paper_comparable": "", "endpoint_gate": "", "convention_margin": "",
     "null_controls": "", "null_untrained": float("nan"), "null_shuffled_labels": float("nan"),
     "null_collapsed": float("nan"),
     **replication_columns(None), **regime_columns({})},
]


def front_page(tmp_path, categories=("width", "sigma_f")) -> str:
    write_table(tmp_path / "claims.parquet", "claims", ROWS)
    run_report_front_page(str(tmp_path / "claims.parquet"), str(tmp_path / "front.rst"), list(categories))
    return (tmp_path / "front.rst").read_text()


def test_every_verdict_with_ours_beside_the_papers_and_figure_links(tmp_path):
    text = front_page(tmp_path)
    assert "2 claims: 0 supported, 1 not_supported, 1 inconclusive." in text
    rows = text.split("   * - ")[1:]
    assert len(rows) == 3  # header + one per claim
    assert rows[1].split("\n     - ") == ["``width-merge-accuracy`` (`width`_)", "**not_supported**",
                                         "0.0281 [0.0219, 0.0343]", "-0.38, –, –", "0.0052\n"]
    assert rows[2].split("\n     - ") == ["``sigma-f-identity`` (`sigma_f`_)", "**inconclusive**", "too few seeds",
                                         "–", "–\n"]
    # one short line per claim: Snakemake centres the landing text, and a taller one is cut off at the top
    assert max(len(line) for line in text.splitlines()[5:]) < 60


def test_front_page_renders_as_a_table(tmp_path):
    text = front_page(tmp_path, categories=("width",))  # a study without a report category gets no link
    assert "``sigma-f-identity`` (" not in text
    # Snakemake defines the link targets (report categories); here they are declared so docutils can resolve them
    targets = "\n.. _width: #\n.. _claims: #\n"
    html = docutils.core.publish_parts(text + targets, writer="html",
                                       settings_overrides={"report_level": 2, "halt_level": 2})["body"]
    assert html.count("<tr") == 3 and html.count("<col ") == 5
    assert "not_supported" in html and "0.0052" in html and '<a class="reference external" href="#">width</a>' in html


def test_a_verdict_says_whether_it_replicated(tmp_path):
    rows = [dict(ROWS[0], **replication_columns({"seeds": [5, 6, 7, 8, 9], "verdict": "inconclusive", "statistic": 0.02,
                                                 "ci_low": 0.01, "ci_high": 0.03, "replicated": False})),
            dict(ROWS[1], **replication_columns({"seeds": [5, 6, 7, 8, 9], "verdict": "inconclusive", "statistic": 1.0,
                                                 "ci_low": 1.0, "ci_high": 1.0, "replicated": True}))]
    write_table(tmp_path / "claims.parquet", "claims", rows)
    run_report_front_page(str(tmp_path / "claims.parquet"), str(tmp_path / "front.rst"), ["width", "sigma_f"])
    cells = [r.split("\n     - ")[2] for r in (tmp_path / "front.rst").read_text().split("   * - ")[2:]]
    assert cells == ["0.0281 [0.0219, 0.0343] (not replicated)", "too few seeds (replicated)"]


def test_a_width_claim_says_its_regime_and_predicted_crossing(tmp_path):
    below = {"regime": {"label": "not reached at ×1; the paper: ×16", "verdict_qualifier": "below_regime",
                        "paper_width": 16.0, "our_widest": 1.0, "predicted_crossing_width": 1.51,
                        "predicted_crossing_width_ci": [0.92, 2.48]}}
    rows = [dict(ROWS[0], **regime_columns(below)), dict(ROWS[1], **regime_columns({}))]
    write_table(tmp_path / "claims.parquet", "claims", rows)
    run_report_front_page(str(tmp_path / "claims.parquet"), str(tmp_path / "front.rst"), ["width"])
    text = (tmp_path / "front.rst").read_text()
    cells = text.split("   * - ")[2].split("\n     - ")
    assert cells[1] == "**not_supported** (below regime: ×1; the paper: ×16)"
    assert cells[2] == "0.0281 [0.0219, 0.0343]; crossing ×1.51"
    assert text.split("   * - ")[3].split("\n     - ")[1] == "**inconclusive**"  # no regime: nothing added
    assert max(len(line) for line in text.splitlines()[5:]) < 60
