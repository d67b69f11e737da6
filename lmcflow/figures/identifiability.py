"""Figures of the identifiability paper's matching study: the matching objective and LMC barriers vs σ_F or per
network variant, matching modes, and the unaligned accuracy drop vs the data's intrinsic dimension."""
from __future__ import annotations

import pandas as pd
import seaborn as sns

from lmcflow.figures.common import empty, plt


def _sigma_axis(ax, values):
    """σ_F axis: symlog so that σ_F = 0 sits left of the log-spaced positive values."""
    vals = sorted(set(float(v) for v in values))
    pos = [v for v in vals if v > 0]
    if pos:
        ax.set_xscale("symlog", linthresh=pos[0], linscale=0.5)
        ax.set_xlim(-0.3 * pos[0] if vals[0] == 0 else pos[0] / 1.5, pos[-1] * 1.5)
    ax.set_xticks(vals)
    ax.set_xticklabels([f"{v:g}" for v in vals], rotation=45 if len(vals) > 5 else 0)
    ax.minorticks_off()
    ax.set_xlabel("σ_F")


# the identifiability figures' panels: levels of the matching objective and barriers of a path (table columns)
OBJECTIVE_LEVELS = {"optimal": "optimal π*", "identity": "identity", "random_mean": "random (mean)"}
LMC_BARRIERS = {"error_barrier_entezari": "error barrier", "loss_barrier_entezari": "loss barrier",
                "relative_accuracy_barrier": "relative accuracy barrier"}


def objective_vs_sigma_f(matching: pd.DataFrame):
    """Activation-matching objective of the optimal, identity and random permutations vs σ_F, per layer."""
    matching = matching[(matching.feature == "post_activation") & (matching.similarity == "pearson")]
    if matching.empty:
        return empty("objective vs σ_F")
    if by_variant(matching):
        return objective_by_variant(matching)
    df = matching.melt(id_vars=["sigma_f", "layer", "seed_a", "seed_b"], value_vars=list(OBJECTIVE_LEVELS),
                       var_name="permutation", value_name="objective")
    df["permutation"] = df["permutation"].map(OBJECTIVE_LEVELS)
    df["layer"] = df["layer"].map(lambda i: f"hidden layer {i + 1}")
    g = sns.relplot(data=df, x="sigma_f", y="objective", hue="permutation", style="permutation", col="layer",
                    kind="line", marker="o", errorbar=("pi", 100), height=2.8, aspect=1.1)
    for ax in g.axes.flat:
        _sigma_axis(ax, df["sigma_f"])
    g.set_titles("{col_name}")
    g.set_ylabels("mean correlation of matched units")
    g.figure.suptitle("Activation-matching objective vs σ_F (line: mean over pairs; band: min–max)", y=1.03)
    return g.figure


def barrier_vs_sigma_f(lmc: pd.DataFrame, split: str = "test"):
    """Unaligned (identity) vs aligned (activation matching, effective weights) barriers vs σ_F."""
    df = lmc[lmc.split == split]
    if df.empty:
        return empty("barrier vs σ_F")
    if by_variant(df):
        return barrier_by_variant(lmc, split)
    long = df.melt(id_vars=["sigma_f", "method", "seed_a", "seed_b"], value_vars=list(LMC_BARRIERS),
                   var_name="metric", value_name="value").dropna(subset=["value"])
    long["metric"] = long["metric"].map(LMC_BARRIERS)
    long["method"] = long["method"].map({"identity": "unaligned", "activation_matching": "aligned (AM)"})
    g = sns.relplot(data=long, x="sigma_f", y="value", hue="method", style="method", col="metric", kind="line",
                    marker="o", errorbar=("pi", 100), facet_kws={"sharey": False}, height=2.8, aspect=1.1)
    for ax in g.axes.flat:
        _sigma_axis(ax, long["sigma_f"])
        ax.axhline(0, color="grey", lw=0.8)
    g.set_titles("{col_name}")
    g.figure.suptitle(f"Barriers vs σ_F ({split}; line: mean over pairs; band: min–max)", y=1.03)
    return g.figure


KIND_LABELS = {"standard": "standard", "w_asymmetric": "W", "syre": "SyRe", "sigma_asymmetric": "σ-asym"}


def variant_label(symmetry: str, sigma_f: float) -> str:
    """A network variant's label: its symmetry kind, with σ_F for the kinds that have fixed offsets."""
    name = KIND_LABELS.get(symmetry, symmetry)
    return f"{name} σ_F={sigma_f:g}" if symmetry in ("w_asymmetric", "syre") else name


def variants(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``df`` with a ``variant`` column, and the variants in a fixed order (kind, then σ_F)."""
    df = df.assign(variant=[variant_label(k, v) for k, v in zip(df.symmetry, df.sigma_f)])
    kinds = list(KIND_LABELS)
    order = (df[["symmetry", "sigma_f", "variant"]].drop_duplicates()
             .assign(r=lambda d: d.symmetry.map(lambda k: kinds.index(k) if k in kinds else len(kinds)))
             .sort_values(["r", "sigma_f"]).variant.tolist())
    return df, order


def dodge(df: pd.DataFrame, hue: str, width: float = 0.3) -> float | bool:
    """Seaborn's point dodge, off for a single hue level (it divides by the number of levels − 1)."""
    return width if df[hue].nunique() > 1 else False


def by_variant(df: pd.DataFrame) -> bool:
    """Studies that sweep the symmetry kind are drawn against the variant, not against σ_F."""
    return df.symmetry.nunique() > 1


def matching_modes(matching: pd.DataFrame):
    """The normalized identity objective (identity − random)/(optimal − random) at every feature point and with
    every similarity the study measured (the authors' matching modes), vs σ_F or per network variant."""
    if matching.empty:
        return empty("activation-matching modes")
    df = matching.assign(mode=matching.feature + " / " + matching.similarity)
    if by_variant(df):
        df, order = variants(df)
        g = sns.catplot(data=df, x="variant", y="identity_normalized", hue="mode", col="layer", kind="point",
                        order=order, errorbar=("pi", 100), dodge=dodge(df, "mode"), height=3, aspect=1.2)
        for ax in g.axes.flat:
            ax.tick_params(axis="x", rotation=30)
    else:
        g = sns.relplot(data=df, x="sigma_f", y="identity_normalized", hue="mode", style="mode", col="layer",
                        kind="line", marker="o", errorbar=("pi", 100), height=2.8, aspect=1.1)
        for ax in g.axes.flat:
            _sigma_axis(ax, df["sigma_f"])
    for ax in g.axes.flat:
        ax.axhline(0, color="grey", lw=0.8)
        ax.axhline(1, color="grey", lw=0.8, ls=":")
    g.set_titles("hidden layer {col_name}")
    g.set_ylabels("(identity − random) / (optimal − random)")
    g.figure.suptitle("Identity vs optimal matching per matching mode (feature / similarity; mean over pairs, "
                      "band: min–max)", y=1.04)
    return g.figure


def objective_by_variant(matching: pd.DataFrame):
    """Optimal, identity and random activation-matching objective per network variant (post-activation Pearson)."""
    df = matching[(matching.feature == "post_activation") & (matching.similarity == "pearson")]
    if df.empty:
        return empty("objective per variant")
    df, order = variants(df)
    long = df.melt(id_vars=["variant", "layer", "seed_a", "seed_b"], value_vars=list(OBJECTIVE_LEVELS),
                   var_name="permutation", value_name="objective")
    long["permutation"] = long["permutation"].map(OBJECTIVE_LEVELS)
    g = sns.catplot(data=long, x="variant", y="objective", hue="permutation", col="layer", kind="point", order=order,
                    errorbar=("pi", 100), dodge=dodge(long, "permutation"), height=3, aspect=1.2)
    for ax in g.axes.flat:
        ax.tick_params(axis="x", rotation=30)
    g.set_titles("hidden layer {col_name}")
    g.set_ylabels("mean correlation of matched units")
    g.figure.suptitle("Activation-matching objective per network variant (mean over pairs; band: min–max)", y=1.04)
    return g.figure


def barrier_by_variant(lmc: pd.DataFrame, split: str = "test"):
    """Unaligned vs aligned (activation matching) barriers per network variant."""
    df = lmc[lmc.split == split]
    if df.empty:
        return empty("barrier per variant")
    df, order = variants(df)
    long = df.melt(id_vars=["variant", "method", "seed_a", "seed_b"], value_vars=list(LMC_BARRIERS), var_name="metric",
                   value_name="value").dropna(subset=["value"])
    long["metric"] = long["metric"].map(LMC_BARRIERS)
    long["method"] = long["method"].map({"identity": "unaligned", "activation_matching": "aligned (AM)"})
    g = sns.catplot(data=long, x="variant", y="value", hue="method", col="metric", kind="point", order=order,
                    errorbar=("pi", 100), dodge=dodge(long, "method"), sharey=False, height=3, aspect=1.2)
    for ax in g.axes.flat:
        ax.tick_params(axis="x", rotation=30)
        ax.axhline(0, color="grey", lw=0.8)
    g.set_titles("{col_name}")
    g.figure.suptitle(f"Barriers per network variant ({split}; mean over pairs; band: min–max)", y=1.04)
    return g.figure


def lmc_vs_k(drops: pd.DataFrame, paper: dict):
    """Unaligned relative accuracy drop vs the data's intrinsic dimension k per σ_F, with the paper's values."""
    if drops.empty:
        return empty("unaligned accuracy drop vs k")
    df = drops.assign(**{"σ_F": drops.sigma_f.map(lambda v: f"{v:g}")})
    fig, ax = plt.subplots(figsize=(4.4, 3.2))
    sns.lineplot(data=df, x="data_k", y="unaligned_drop", hue="σ_F", marker="o", errorbar=("pi", 100), ax=ax)
    ax.plot(list(paper), list(paper.values()), "k*--", ms=9, label="paper (σ_F = 1)")
    ks = sorted(set(df.data_k) | set(paper))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks)
    ax.set_xticklabels([f"{k:g}" for k in ks])
    ax.minorticks_off()
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("intrinsic dimension k of the data")
    ax.set_ylabel("unaligned accuracy drop (%)")
    ax.legend(fontsize=7)
    ax.set_title(f"Unaligned interpolation vs k (trained {int(df.epochs.max())} epochs; mean over pairs, "
                 f"band: min–max)", fontsize=8)
    return fig


