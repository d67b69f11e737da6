"""Figures of the width paper's mechanism study: barriers per merge method, LEWC/LLFC, cross ratios and effective
rank vs width, and the weight-decay comparison."""
from __future__ import annotations

import pandas as pd
import seaborn as sns

from lmcflow.figures.common import empty, plt, wd_order, width_axis, with_wd

METHOD_ORDER = ("identity", "weight_matching", "activation_matching", "random_permutation")


def _at_half(lm: pd.DataFrame, method: str = "identity") -> pd.DataFrame:
    """Rows at λ = ½ (λ-independent metrics repeat on every λ; one λ avoids counting them 11 times)."""
    return lm[(lm.method == method) & ((lm.lam_paper - 0.5).abs() < 1e-9)]


def _off_half(lm: pd.DataFrame, method: str = "identity") -> tuple[pd.DataFrame, str]:
    """LEWC/LLFC rows at interior λ ≠ ½ (at λ = ½ the LEWC target is a multiple of the LLFC target, so the
    two cosines coincide); falls back to λ = ½ when the mechanism ran at ½ only."""
    lam = lm.lam_paper
    df = lm[(lm.method == method) & (lam > 0) & (lam < 1) & ((lam - 0.5).abs() > 1e-9)]
    return (df, "mean over λ ∈ (0,1), λ ≠ ½") if len(df) else (_at_half(lm, method), "λ = ½")


def _facet_widths(g, ylabel: str, title: str, zero: bool = False):
    for ax in g.axes.flat:
        width_axis(ax)
        if zero:
            ax.axhline(0, color="grey", lw=0.8)
    g.set_ylabels(ylabel)
    g.figure.suptitle(title, y=1.03)
    return g.figure


def method_barrier_vs_width(barriers: pd.DataFrame, definition: str = "entezari", split: str = "test"):
    """Raw error barrier vs width, one line per alignment method, one panel per weight decay."""
    df = barriers[(barriers.definition == definition) & (barriers.split == split) & (barriers.metric == "error")
                  & ~barriers.calibrated]
    if df.empty:
        return empty("barrier vs width per method")
    df = with_wd(df)
    order = [m for m in METHOD_ORDER if m in set(df.method)] + sorted(set(df.method) - set(METHOD_ORDER))
    g = sns.relplot(data=df, x="width", y="value", hue="method", style="method", hue_order=order,
                    style_order=order, col="weight decay", kind="line", marker="o", errorbar=("pi", 100),
                    height=3, aspect=1.2)
    return _facet_widths(g, f"{definition} error barrier ({split})",
                         "Error barrier vs width per alignment method (mean over pairs; band: min–max)", zero=True)


def lewc_vs_width(lm: pd.DataFrame):
    """LEWC and LLFC cosine vs width (mean over interior λ ≠ ½), one panel per hidden layer."""
    df, where = _off_half(lm)
    if df.empty:
        return empty("LEWC vs width")
    forms = {"lewc_cos": "LEWC  λ^l f_A + (1−λ)^l f_B", "llfc_cos": "LLFC  λ f_A + (1−λ) f_B",
             "lewc_cos_perturbed": "LEWC of A and a random perturbation R of A (‖θ_R − θ_A‖ = ‖θ_B − θ_A‖)"}
    long = with_wd(df).melt(id_vars=["width", "layer", "seed_a", "seed_b", "weight decay"],
                             value_vars=[c for c in forms if c in df.columns], var_name="form", value_name="cosine")
    long["form"] = long["form"].map(forms)
    g = sns.relplot(data=long, x="width", y="cosine", hue="form", style="weight decay", col="layer", kind="line",
                    marker="o", errorbar=("pi", 100), height=3, aspect=1.1)
    return _facet_widths(g, "mean cos(f_l(θ_λ), target)", f"LEWC vs LLFC and the flatness control, {where} "
                                                           f"(no permutation)")


def cross_ratio_vs_width(lm: pd.DataFrame):
    """Reciprocal orthogonality vs width: cross-norm ratios and cross cosine, per layer ≥ 2."""
    df = _at_half(lm)
    if len(df) and df.layer.max() >= 2:
        df = df[df.layer >= 2]  # layer 1: both models read the same input, the ratios are 1 by definition
    if df.empty:
        return empty("cross-norm ratio vs width")
    df = df.assign(cross_transform_cos_permuted=(df.cross_transform_cos_permuted_a
                                                 + df.cross_transform_cos_permuted_b) / 2)
    names = {"cross_ratio_a": "‖W_A z_B‖/‖W_A z_A‖", "cross_ratio_b": "‖W_B z_A‖/‖W_B z_B‖",
             "cross_cos": "cos(W_A z_B + W_B z_A, W_A z_A + W_B z_B)",
             "cross_transform_cos": "cos((W_A + W_B)(z_A + z_B), W_A z_A + W_B z_B)",
             "cross_transform_cos_permuted": "the same, each model with a relabelled copy of itself"}
    long = with_wd(df).melt(id_vars=["width", "layer", "seed_a", "seed_b", "weight decay"],
                             value_vars=list(names), var_name="quantity")
    long["quantity"] = long["quantity"].map(names)
    g = sns.relplot(data=long, x="width", y="value", hue="quantity", style="weight decay", col="layer", kind="line",
                    marker="o", errorbar=("pi", 100), height=3, aspect=1.2)
    return _facet_widths(g, "value", "Reciprocal orthogonality vs width (no permutation)", zero=True)


def rank_vs_width(lm: pd.DataFrame):
    """Relative effective rank and rank99 fraction of each hidden layer's weight vs width (mean of A and B)."""
    df = _at_half(lm).copy()
    if df.empty:
        return empty("rank vs width")
    df["effective rank / min dim"] = (df.erank_rel_a + df.erank_rel_b) / 2
    df["rank99 / min dim"] = (df.rank99_frac_a + df.rank99_frac_b) / 2
    df["active fraction"] = (df.frac_active_a + df.frac_active_b) / 2
    df["active Jaccard A, B"] = df.active_jaccard
    df["Jaccard of independent sets"] = df.active_jaccard_independent
    long = with_wd(df).melt(id_vars=["width", "layer", "seed_a", "seed_b", "weight decay"],
                             value_vars=["effective rank / min dim", "rank99 / min dim", "active fraction",
                                         "active Jaccard A, B", "Jaccard of independent sets"],
                             var_name="statistic")
    g = sns.relplot(data=long, x="width", y="value", hue="statistic", style="weight decay", col="layer",
                    kind="line", marker="o", errorbar=("pi", 100), height=3, aspect=1.2)
    return _facet_widths(g, "fraction", "Low rank, neuron activity and active-unit overlap vs width")


def weight_decay_comparison(barriers: pd.DataFrame, lm: pd.DataFrame, definition: str = "entezari",
                            split: str = "test"):
    """Default vs weak weight decay: error barrier, LEWC cosine (interior λ ≠ ½, layers ≥ 2) and relative rank."""
    b = barriers[(barriers.definition == definition) & (barriers.split == split) & (barriers.metric == "error")
                 & ~barriers.calibrated & (barriers.method == "identity")]
    m = _at_half(lm)
    if b.empty and m.empty:
        return empty("default vs weak weight decay")
    lewc, where = _off_half(lm)
    deep = lewc[lewc.layer >= 2] if len(lewc) and lewc.layer.max() >= 2 else lewc
    m = m.assign(erank=(m.erank_rel_a + m.erank_rel_b) / 2)
    order = wd_order(b, m)
    palette = dict(zip(order, sns.color_palette("colorblind", len(order)), strict=True))
    panels = [(b, "value", f"{definition} error barrier ({split})", "error barrier"),
              (deep, "lewc_cos", "LEWC cosine", f"LEWC, layers ≥ 2, {where}"),
              (m, "erank", "effective rank / min dim", "relative effective rank")]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, (df, y, label, title) in zip(axes, panels, strict=True):
        if df.empty:
            ax.set_axis_off()
            continue
        sns.lineplot(data=with_wd(df, order), x="width", y=y, hue="weight decay", style="weight decay",
                     hue_order=order, style_order=order, marker="o", errorbar=("pi", 100), ax=ax, palette=palette)
        width_axis(ax)
        ax.set_ylabel(label)
        ax.set_title(title, fontsize=9)
    axes[0].axhline(0, color="grey", lw=0.8)
    fig.suptitle("Default vs weak weight decay (no permutation; mean over pairs, band: min–max)", y=1.03)
    fig.tight_layout()
    return fig
