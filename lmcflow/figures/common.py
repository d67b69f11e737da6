"""What every figure shares: the Agg backend and seaborn theme, atomic PNG/PDF writing without volatile metadata,
the width axis, an empty-data placeholder and the weight-decay labels."""
from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lmcflow.io import atomic_path  # noqa: E402

sns.set_theme(style="whitegrid", context="paper")


# Matplotlib stamps PDFs with a creation date and both formats with its version; without them a
# figure's bytes are a function of its data only (two runs of one config give identical files).
NO_VOLATILE_METADATA = {"png": {"Software": None}, "pdf": {"Creator": None, "Producer": None, "CreationDate": None}}


def save_figure(fig, png_path, pdf_path=None) -> None:
    for path in filter(None, (png_path, pdf_path)):
        fmt = os.path.splitext(str(path))[1].lstrip(".")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight", metadata=NO_VOLATILE_METADATA.get(fmt))
    plt.close(fig)


def width_axis(ax):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("width multiplier")


def empty(title: str):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.text(0.5, 0.5, f"no data for\n{title}", ha="center", va="center")
    ax.set_axis_off()
    return fig


def wd_order(*frames) -> list[str]:
    """Weight-decay labels, largest (the default) first, so every panel and figure uses one order and colour."""
    vals = set()
    for f in frames:
        vals |= set(f.weight_decay) if len(f) else set()
    return [f"{v:g}" for v in sorted(vals, reverse=True)]


def with_wd(df: pd.DataFrame, order: list | None = None) -> pd.DataFrame:
    df = df.copy()
    order = order or wd_order(df)
    df["weight decay"] = pd.Categorical(df.weight_decay.map(lambda v: f"{v:g}"), categories=order, ordered=True)
    return df


