"""The report's landing page (lmcflow.report_jobs.run_report_front_page): every verdict, ours beside the paper's,
with links to the study's figures, as a three-column table that renders as reStructuredText."""
import re

import docutils.core

from lmcflow.report_jobs import run_report_front_page
from lmcflow.tables import write_table

ROWS = [
    {"claim_id": "width-merge-accuracy", "paper": "Ito et al.", "statement": "s", "study": "width",
     "verdict": "not_supported", "reason": "", "statistic_name": "midpoint error barrier", "statistic": 0.0281,
     "ci_low": 0.0219, "ci_high": 0.0343, "ci_method": "jackknife", "n_seeds": 5, "n_pairs": 10, "controls": "",
     "paper_quantity": "plain-average midpoint error barrier", "paper_value": 0.0052,
     "paper_scale": "MLP, 16x width, MNIST", "our_value": 0.0281, "scale": "x1"},
    {"claim_id": "sigma-f-identity", "paper": "Bürgin et al.", "statement": "s", "study": "sigma_f",
     "verdict": "inconclusive", "reason": "too few seeds", "statistic_name": "normalized identity objective",
     "statistic": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "ci_method": "", "n_seeds": 3,
     "n_pairs": 3, "controls": "", "paper_quantity": "", "paper_value": float("nan"), "paper_scale": "",
     "our_value": float("nan"), "scale": ""},
]


def front_page(tmp_path, categories=("width", "sigma_f")) -> str:
    write_table(tmp_path / "claims.parquet", "claims", ROWS)
    run_report_front_page(str(tmp_path / "claims.parquet"), str(tmp_path / "front.rst"), list(categories))
    return (tmp_path / "front.rst").read_text()


def test_every_verdict_with_ours_beside_the_papers_and_figure_links(tmp_path):
    text = front_page(tmp_path)
    assert "``width-merge-accuracy`` (`width`_)" in text and "**not_supported**" in text
    assert "midpoint error barrier: 0.0281 [0.0219, 0.0343]; paper: plain-average midpoint error barrier: 0.0052" \
        in text
    assert "(too few seeds); paper: –" in text and "**inconclusive**" in text
    # three columns: the table must fit beside the rule graph of Snakemake's landing page
    assert ":widths: 30 20 50" in text and text.count("   * - ") == 3


def test_front_page_renders_as_a_three_column_table(tmp_path):
    text = front_page(tmp_path, categories=("width",))  # a study without a report category gets no link
    assert "``sigma-f-identity`` (" not in text
    # Snakemake defines the link targets (report categories); here they are declared so docutils can resolve them
    targets = "\n.. _width: #\n.. _claims: #\n"
    html = docutils.core.publish_parts(text + targets, writer="html",
                                       settings_overrides={"report_level": 2, "halt_level": 2})["body"]
    assert html.count("<tr") == 3 and re.findall(r"<col [^>]*?(\d+)%", html) == ["30", "20", "50"]
    assert "not_supported" in html and "0.0052" in html and '<a class="reference external" href="#">width</a>' in html
