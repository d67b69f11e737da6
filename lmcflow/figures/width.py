"""Figures of the width paper's barrier study: barriers vs width, paths along λ, calibration, logit norms, Table 1."""
from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns

from lmcflow.claims.width import lewc_logit_ratio, n_weight_layers
from lmcflow.figures.common import empty, plt, width_axis, with_wd


def barrier_vs_width(barriers: pd.DataFrame, definition: str = "entezari", split: str = "test"):
    """Error and loss barrier vs width, raw and calibrated, one column per alignment method."""
    df = barriers[(barriers.definition == definition) & (barriers.split == split)].copy()
    if df.empty:
        return empty("barrier vs width")
    df["kind"] = df.calibrated.map({False: "raw", True: "calibrated"})
    df["metric"] = df["metric"].map({"error": "error barrier", "loss": "loss barrier"})
    style = "kind"
    if df.weight_decay.nunique() > 1:  # a weight-decay arm: line style tells the arms apart
        df, style = with_wd(df), "weight decay"
    g = sns.relplot(data=df, x="width", y="value", hue="kind", style=style, row="metric", col="method",
                    kind="line", marker="o", errorbar=("pi", 100), facet_kws={"sharey": "row"},
                    height=2.6, aspect=1.3)
    for ax in g.axes.flat:
        width_axis(ax)
        ax.axhline(0, color="grey", lw=0.8)
    g.set_titles(row_template="{row_name}", col_template="{col_name}")
    g.set_ylabels(f"{definition} barrier ({split})")
    g.figure.suptitle("Barrier vs width (line: mean over pairs; band: min–max)", y=1.02)
    return g.figure


def error_along_lambda(interp: pd.DataFrame, split: str = "test"):
    """Test error along the interpolation path, one line per width."""
    df = interp[interp.split == split].copy()
    if df.empty:
        return empty("error along λ")
    df["width"] = df["width"].map(lambda w: f"{w:g}")
    row = None
    if df.weight_decay.nunique() > 1:  # one row of panels per weight-decay arm
        df, row = with_wd(df), "weight decay"
    g = sns.relplot(data=df, x="lam", y="error", hue="width", col="method", row=row, kind="line", marker="o",
                    errorbar=("pi", 100), height=3, aspect=1.2, palette="viridis")
    g.set_axis_labels("λ  (θ = (1−λ)θ_A + λθ_B)", f"{split} error")
    g.set_titles(row_template="weight decay {row_name}", col_template="{col_name}")
    return g.figure


def loss_barrier_raw_vs_calibrated(barriers: pd.DataFrame, definition: str = "entezari", split: str = "test"):
    """Each pair's raw vs calibrated loss barrier; points below the diagonal gained from calibration."""
    df = barriers[(barriers.definition == definition) & (barriers.split == split) & (barriers.metric == "loss")]
    if df.empty:
        return empty("raw vs calibrated")
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


def logit_norm_along_lambda(interp: pd.DataFrame, split: str = "test"):
    """Plain-average path: mean logit norm relative to the endpoints' mean, beside LEWC's λ^D + (1−λ)^D (dashed),
    and the same after temperature calibration (β · norm), one line per width."""
    df = interp[(interp.split == split) & (interp.method == "identity")].copy()
    if df.empty or "logit_norm" not in df.columns or df.logit_norm.isna().all():
        return empty("logit norm along λ")
    keys = ["study", "width", "weight_decay", "seed_a", "seed_b"]
    df["scaled"] = df.beta * df.logit_norm
    for col in ("logit_norm", "scaled"):
        ends = df[df.lam.isin([0.0, 1.0])].groupby(keys)[col].mean().rename(f"{col}_ends")
        df = df.join(ends, on=keys)
        df[f"{col}_rel"] = df[col] / df[f"{col}_ends"]
    df["width"] = df["width"].map(lambda w: f"{w:g}")
    style = None
    if df.weight_decay.nunique() > 1:
        df, style = with_wd(df), "weight decay"
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4), sharey=False)
    lam = np.linspace(0, 1, 101)
    depths = sorted({n_weight_layers(a, d) for a, d in zip(df.arch, df.depth) if a in ("mlp", "vgg11", "resnet20")})
    for ax, col, title in ((axes[0], "logit_norm_rel", "‖z(θ_λ)‖ / endpoints' mean"),
                           (axes[1], "scaled_rel", "β(λ)·‖z(θ_λ)‖ / endpoints' mean (calibrated)")):
        sns.lineplot(data=df, x="lam", y=col, hue="width", style=style, marker="o", errorbar=("pi", 100), ax=ax,
                     palette="viridis")
        for d in depths:
            ax.plot(lam, lewc_logit_ratio(lam, d), color="black", ls="--", lw=1, label=f"LEWC λ^{d} + (1−λ)^{d}")
        ax.axhline(1, color="grey", lw=0.8)
        ax.set_xlabel("λ  (θ = (1−λ)θ_A + λθ_B)")
        ax.set_ylabel(title)
        ax.legend(fontsize=7)
    fig.suptitle(f"Logit norm along the plain-average path ({split}; line: mean over pairs, band: min–max)", y=1.03)
    fig.tight_layout()
    return fig


def paper_table1(t1: pd.DataFrame):
    """Our midpoint error barrier at each width study's widest width (point and 95% CI) beside the paper's
    Table-1 value: a filled marker where our row is a Table-1 row, a hollow one for the nearest row."""
    if t1.empty:
        return empty("Table 1")
    df = t1.copy()
    df["row"] = [f"{r.arch} · {r.dataset} · {r.width:g}x · wd {r.weight_decay:g}" + ("" if r.bias else " · no bias")
                 for r in df.itertuples()]
    methods = [m for m in ("identity", "weight_matching") if m in set(df.method)]
    rows = list(dict.fromkeys(df.row))
    fig, axes = plt.subplots(1, len(methods), figsize=(5.2 * len(methods), 0.55 * len(rows) + 1.6), sharey=True,
                             squeeze=False)
    for ax, method in zip(axes[0], methods, strict=True):
        m = df[df.method == method].set_index("row").reindex(rows)
        y = np.arange(len(rows))
        lo = (m.barrier - m.ci_low).fillna(0).clip(lower=0)
        hi = (m.ci_high - m.barrier).fillna(0).clip(lower=0)
        ax.errorbar(100 * m.barrier, y, xerr=[100 * lo, 100 * hi], fmt="o", color="C0", label="ours (95% CI)")
        exact = m.paper_value.notna()
        ax.scatter(100 * m.paper_value[exact], y[exact.to_numpy()], marker="D", color="C3", zorder=3,
                   label="paper, Table 1 (same row)")
        near = m.paper_value.isna() & m.reference_value.notna()
        ax.scatter(100 * m.reference_value[near], y[near.to_numpy()], marker="D", facecolors="none",
                   edgecolors="C3", zorder=3, label="paper, nearest Table-1 row")
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(y)
        ax.set_yticklabels(rows, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("midpoint test error barrier (%)")
        ax.set_title("plain average" if method == "identity" else "weight matching", fontsize=9)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Table 1 (Ito et al. 2026): error barrier at λ = ½, widest width", y=1.02)
    fig.tight_layout()
    return fig


