"""Seaborn figures, each written as PNG and PDF (atomically)."""
from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lmcflow.io import atomic_path  # noqa: E402

sns.set_theme(style="whitegrid", context="paper")


def save_figure(fig, png_path, pdf_path=None) -> None:
    for path in filter(None, (png_path, pdf_path)):
        fmt = os.path.splitext(str(path))[1].lstrip(".")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight")
    plt.close(fig)


def _width_axis(ax):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width multiplier")


def _empty(title: str):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.text(0.5, 0.5, f"no data for\n{title}", ha="center", va="center")
    ax.set_axis_off()
    return fig


def barrier_vs_width(barriers: pd.DataFrame, definition: str = "entezari", split: str = "test"):
    """Error and loss barrier vs width, raw and calibrated, one column per alignment method."""
    df = barriers[(barriers.definition == definition) & (barriers.split == split)].copy()
    if df.empty:
        return _empty("barrier vs width")
    df["kind"] = df.calibrated.map({False: "raw", True: "calibrated"})
    df["metric"] = df["metric"].map({"error": "error barrier", "loss": "loss barrier"})
    g = sns.relplot(data=df, x="width", y="value", hue="kind", style="kind", row="metric", col="method",
                    kind="line", marker="o", errorbar=("pi", 100), facet_kws={"sharey": "row"},
                    height=2.6, aspect=1.3)
    for ax in g.axes.flat:
        _width_axis(ax)
        ax.axhline(0, color="grey", lw=0.8)
    g.set_ylabels(f"{definition} barrier ({split})")
    g.figure.suptitle("Barrier vs width (line: mean over pairs; band: min–max)", y=1.02)
    return g.figure


def error_along_lambda(interp: pd.DataFrame, split: str = "test"):
    """Test error along the interpolation path, one line per width."""
    df = interp[interp.split == split].copy()
    if df.empty:
        return _empty("error along λ")
    df["width"] = df["width"].map(lambda w: f"{w:g}")
    g = sns.relplot(data=df, x="lam", y="error", hue="width", col="method", kind="line", marker="o",
                    errorbar=("pi", 100), height=3, aspect=1.2, palette="viridis")
    g.set_axis_labels("λ  (θ = (1−λ)θ_A + λθ_B)", f"{split} error")
    return g.figure


def loss_barrier_raw_vs_calibrated(barriers: pd.DataFrame, definition: str = "entezari", split: str = "test"):
    """Each pair's raw vs calibrated loss barrier; points below the diagonal gained from calibration."""
    df = barriers[(barriers.definition == definition) & (barriers.split == split) & (barriers.metric == "loss")]
    if df.empty:
        return _empty("raw vs calibrated")
    keys = ["width", "seed_a", "seed_b", "method"]
    wide = df.pivot_table(index=keys, columns="calibrated", values="value").reset_index()
    wide = wide.rename(columns={False: "raw", True: "calibrated"})
    wide["width"] = wide["width"].map(lambda w: f"{w:g}")
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    sns.scatterplot(data=wide, x="raw", y="calibrated", hue="width", style="method", ax=ax, palette="viridis")
    lim = [min(0, wide[["raw", "calibrated"]].min().min()), max(wide[["raw", "calibrated"]].max().max(), 1e-3)]
    ax.plot(lim, lim, color="grey", lw=0.8, ls="--")
    ax.set_xlabel(f"raw loss barrier ({definition})")
    ax.set_ylabel("calibrated loss barrier")
    return fig
