"""The width paper's Table 1 beside ours (lmcflow.paper_table1, results/tables/paper_table1.parquet) on hand-built
barrier tables with the real schema: which barrier it reads, the seed-level interval, the exact / nearest
Table-1 row, and the figure."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lmcflow.claims.width import TABLE1_ROWS
from lmcflow.paper_table1 import describe_reference, reference_row, table1_rows
from lmcflow.tables import TABLES, make_frame
from tests.claim_tables import PAIRS, Noise, table


def barrier_rows(study, dataset, arch, truth, widths=(1.0, 16.0), wds=(3e-3, 1e-4),
                 methods=("identity", "weight_matching"), pairs=PAIRS, seed=0):
    """Midpoint test error barriers ``truth(width, wd, method)`` per seed pair (per-seed effect plus noise), and
    decoys the table must not read: the calibrated loss, the train split and the other barrier definition."""
    noise = Noise(0.002, 0.001, seed)
    rows = []
    for width in widths:
        for wd in wds:
            for method in methods:
                for a, b in pairs:
                    base = {"study": study, "dataset": dataset, "arch": arch, "width": width, "weight_decay": wd,
                            "method": method, "seed_a": a, "seed_b": b}
                    v = noise.pair(truth(width, wd, method), a, b)
                    rows.append({**base, "split": "test", "metric": "error", "calibrated": False,
                                 "definition": "midpoint", "value": v})
                    rows += [{**base, "split": "test", "metric": "loss", "calibrated": True,
                              "definition": "midpoint", "value": 9.0},
                             {**base, "split": "train", "metric": "error", "calibrated": False,
                              "definition": "midpoint", "value": 9.0},
                             {**base, "split": "test", "metric": "error", "calibrated": False,
                              "definition": "entezari", "value": 9.0}]
    return rows


def truth_mlp(width, wd, method):
    return {"identity": 0.01, "weight_matching": 0.0}[method] + (0.05 if wd < 1e-3 else 0.0) + 0.1 / width


def test_table1_rows_are_the_papers():
    """The three rows of the paper's Table 1, in fractions of test error (0.52% = 0.0052)."""
    got = {(r.arch, r.dataset, r.width): (r.plain, r.weight_matching) for r in TABLE1_ROWS}
    assert got == {("mlp", "mnist", 16.0): (0.0052, -0.0003), ("vgg11", "cifar10", 16.0): (0.0131, 0.0700),
                   ("resnet20", "cifar10", 32.0): (0.0269, 0.0514)}
    assert reference_row("vgg11").value("weight_matching") == 0.0700 and reference_row("sum_relu") is None


def test_exact_table1_row_at_the_widest_width():
    b = table("barriers", barrier_rows("w", "mnist", "mlp", truth_mlp))
    rows = table1_rows(b, {"w": {"dataset": "mnist", "arch": "mlp", "bias": True}})
    df = make_frame("paper_table1", rows)
    assert list(df.columns) == [c for c, _ in TABLES["paper_table1"]]
    assert [(r.weight_decay, r.method) for r in df.itertuples()] == [
        (3e-3, "identity"), (3e-3, "weight_matching"), (1e-4, "identity"), (1e-4, "weight_matching")]
    assert (df.width == 16.0).all() and (df.n_seeds == 6).all() and (df.n_pairs == 15).all()
    mid = b[(b.metric == "error") & ~b.calibrated & (b.split == "test") & (b.definition == "midpoint")
            & (b.width == 16.0)].groupby(["weight_decay", "method"]).value.mean()
    for r in df.itertuples():
        assert r.barrier == pytest.approx(mid[(r.weight_decay, r.method)], abs=1e-12)  # no decoy read
        assert r.ci_low < r.barrier < r.ci_high and r.ci_high - r.ci_low < 0.02  # 6 seeds: an interval
    by = df.set_index(["weight_decay", "method"])
    # the paper's weight decay is a Table-1 row: the paper's value beside ours; the weak arm only references it
    assert by.paper_value[(3e-3, "identity")] == 0.0052 and by.paper_value[(3e-3, "weight_matching")] == -0.0003
    assert by.paper_value[[(1e-4, "identity"), (1e-4, "weight_matching")]].isna().all()
    assert by.reference_value[(1e-4, "identity")] == 0.0052
    assert by.reference[(3e-3, "identity")] == "exact: Table-1 row MLP, 16x width, MNIST; both at 16x"
    assert "weight decay 0.0001 (paper: 0.003)" in by.reference[(1e-4, "identity")]
    assert (df.paper_row == "MLP, 16x width, MNIST").all() and (df.paper_width == 16.0).all()


def test_nearest_rows_and_what_differs():
    studies = {"f": {"dataset": "fashion_mnist", "arch": "mlp", "bias": True},
               "nb": {"dataset": "mnist", "arch": "mlp", "bias": False},
               "v": {"dataset": "cifar10", "arch": "vgg11", "bias": True},
               "r": {"dataset": "cifar10", "arch": "resnet20", "bias": True},
               "s": {"dataset": "coherence_m1", "arch": "sum_relu", "bias": True}}
    b = table("barriers", barrier_rows("f", "fashion_mnist", "mlp", truth_mlp, widths=(0.5, 2.0), wds=(3e-3,))
              + barrier_rows("nb", "mnist", "mlp", truth_mlp, wds=(3e-3,), seed=1)
              + barrier_rows("v", "cifar10", "vgg11", truth_mlp, widths=(8.0, 16.0), wds=(3e-3,), seed=2)
              + barrier_rows("r", "cifar10", "resnet20", truth_mlp, widths=(16.0, 32.0), wds=(3e-3,), seed=3)
              + barrier_rows("s", "coherence_m1", "sum_relu", truth_mlp, wds=(0.0,), methods=("identity",), seed=4))
    df = make_frame("paper_table1", table1_rows(b, studies)).set_index(["study", "method"])
    assert list(dict.fromkeys(df.index.get_level_values(0))) == ["f", "nb", "v", "r", "s"]  # config order
    f = df.loc[("f", "identity")]
    assert f.width == 2.0 and math.isnan(f.paper_value) and f.reference_value == 0.0052
    assert f.reference == ("nearest: Table-1 row MLP, 16x width, MNIST (same architecture); differs in dataset "
                           "fashion_mnist (paper: mnist); our widest width 2x, the paper's 16x")
    nb = df.loc[("nb", "weight_matching")]
    assert math.isnan(nb.paper_value) and "no biases (paper: with biases)" in nb.reference and not nb.bias
    assert df.loc[("v", "weight_matching")].paper_value == 0.0700 and df.loc[("v", "identity")].paper_value == 0.0131
    assert df.loc[("r", "identity")].paper_value == 0.0269 and df.loc[("r", "identity")].width == 32.0
    s = df.loc[("s", "identity")]
    assert s.reference == "no Table-1 row for this architecture" and math.isnan(s.reference_value)
    assert s.paper_row == "" and ("s", "weight_matching") not in df.index  # a method not evaluated: no row


def test_no_interval_below_four_seeds():
    three = [p for p in PAIRS if max(p) < 3]
    b = table("barriers", barrier_rows("w", "mnist", "mlp", truth_mlp, pairs=three))
    df = pd.DataFrame(table1_rows(b, {"w": {"dataset": "mnist", "arch": "mlp"}}))
    assert (df.n_seeds == 3).all() and df.ci_low.isna().all() and df.ci_high.isna().all()
    assert df.barrier.notna().all() and df.bias.all()  # bias defaults to True


def test_describe_reference_is_exact_only_for_the_papers_setting():
    ref = reference_row("resnet20")
    assert describe_reference(ref, "cifar10", 32.0, 3e-3, True)[0]
    assert describe_reference(ref, "cifar10", 8.0, 3e-3, True) == (
        True, "exact: Table-1 row ResNet-20, 32x width, CIFAR-10; our widest width 8x, the paper's 32x")
    for args in (("cifar100", 32.0, 3e-3, True), ("cifar10", 32.0, 1e-4, True), ("cifar10", 32.0, 3e-3, False)):
        assert not describe_reference(ref, *args)[0], args


def test_table1_figure(tmp_path):
    from lmcflow.figures.common import save_figure
    from lmcflow.figures.width import paper_table1

    b = table("barriers", barrier_rows("w", "mnist", "mlp", truth_mlp))
    df = make_frame("paper_table1", table1_rows(b, {"w": {"dataset": "mnist", "arch": "mlp", "bias": True}}))
    fig = paper_table1(df)
    ax_plain, ax_wm = fig.axes[:2]
    # ours: the widest width's mean barrier, in percent, one point per row (both arms)
    xs = np.sort(ax_plain.lines[0].get_xdata())
    assert xs == pytest.approx(np.sort(100 * df[df.method == "identity"].barrier.to_numpy()))
    # the paper's value as a filled diamond on the exact row, hollow on the weak arm's nearest row
    from matplotlib.collections import PathCollection

    offsets = [c.get_offsets() for c in ax_plain.collections if isinstance(c, PathCollection) and len(c.get_offsets())]
    assert sorted(float(o[0][0]) for o in offsets) == pytest.approx([0.52, 0.52])
    assert ax_wm.get_title() == "weight matching"
    save_figure(fig, tmp_path / "t1.png", tmp_path / "t1.pdf")
    assert (tmp_path / "t1.png").stat().st_size > 1000 and (tmp_path / "t1.pdf").stat().st_size > 1000
    assert paper_table1(make_frame("paper_table1", [])) is not None  # an empty table still draws
