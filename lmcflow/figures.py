"""Seaborn figures, each written as PNG and PDF (atomically)."""
from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
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
    style = "kind"
    if df.weight_decay.nunique() > 1:  # a weight-decay arm: line style tells the arms apart
        df, style = _with_wd(df), "weight decay"
    g = sns.relplot(data=df, x="width", y="value", hue="kind", style=style, row="metric", col="method",
                    kind="line", marker="o", errorbar=("pi", 100), facet_kws={"sharey": "row"},
                    height=2.6, aspect=1.3)
    for ax in g.axes.flat:
        _width_axis(ax)
        ax.axhline(0, color="grey", lw=0.8)
    g.set_titles(row_template="{row_name}", col_template="{col_name}")
    g.set_ylabels(f"{definition} barrier ({split})")
    g.figure.suptitle("Barrier vs width (line: mean over pairs; band: min–max)", y=1.02)
    return g.figure


def error_along_lambda(interp: pd.DataFrame, split: str = "test"):
    """Test error along the interpolation path, one line per width."""
    df = interp[interp.split == split].copy()
    if df.empty:
        return _empty("error along λ")
    df["width"] = df["width"].map(lambda w: f"{w:g}")
    row = None
    if df.weight_decay.nunique() > 1:  # one row of panels per weight-decay arm
        df, row = _with_wd(df), "weight decay"
    g = sns.relplot(data=df, x="lam", y="error", hue="width", col="method", row=row, kind="line", marker="o",
                    errorbar=("pi", 100), height=3, aspect=1.2, palette="viridis")
    g.set_axis_labels("λ  (θ = (1−λ)θ_A + λθ_B)", f"{split} error")
    g.set_titles(row_template="weight decay {row_name}", col_template="{col_name}")
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


def logit_norm_along_lambda(interp: pd.DataFrame, split: str = "test"):
    """Plain-average path: mean logit norm relative to the endpoints' mean, beside LEWC's λ^D + (1−λ)^D (dashed),
    and the same after temperature calibration (β · norm), one line per width."""
    from lmcflow.claims.width import lewc_logit_ratio, n_weight_layers

    df = interp[(interp.split == split) & (interp.method == "identity")].copy()
    if df.empty or "logit_norm" not in df.columns or df.logit_norm.isna().all():
        return _empty("logit norm along λ")
    keys = ["study", "width", "weight_decay", "seed_a", "seed_b"]
    df["scaled"] = df.beta * df.logit_norm
    for col in ("logit_norm", "scaled"):
        ends = df[df.lam.isin([0.0, 1.0])].groupby(keys)[col].mean().rename(f"{col}_ends")
        df = df.join(ends, on=keys)
        df[f"{col}_rel"] = df[col] / df[f"{col}_ends"]
    df["width"] = df["width"].map(lambda w: f"{w:g}")
    style = None
    if df.weight_decay.nunique() > 1:
        df, style = _with_wd(df), "weight decay"
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
        return _empty("Table 1")
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


# --------------------------------------------------------------------------- identifiability paper


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


def objective_vs_sigma_f(matching: pd.DataFrame):
    """Activation-matching objective of the optimal, identity and random permutations vs σ_F, per layer."""
    if matching.empty:
        return _empty("objective vs σ_F")
    names = {"optimal": "optimal π*", "identity": "identity", "random_mean": "random (mean)"}
    df = matching.melt(id_vars=["sigma_f", "layer", "seed_a", "seed_b"], value_vars=list(names),
                       var_name="permutation", value_name="objective")
    df["permutation"] = df["permutation"].map(names)
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
        return _empty("barrier vs σ_F")
    cols = {"error_barrier_entezari": "error barrier", "loss_barrier_entezari": "loss barrier",
            "relative_accuracy_barrier": "relative accuracy barrier"}
    long = df.melt(id_vars=["sigma_f", "method", "seed_a", "seed_b"], value_vars=list(cols),
                   var_name="metric", value_name="value").dropna(subset=["value"])
    long["metric"] = long["metric"].map(cols)
    long["method"] = long["method"].map({"identity": "unaligned", "activation_matching": "aligned (AM)"})
    g = sns.relplot(data=long, x="sigma_f", y="value", hue="method", style="method", col="metric", kind="line",
                    marker="o", errorbar=("pi", 100), facet_kws={"sharey": False}, height=2.8, aspect=1.1)
    for ax in g.axes.flat:
        _sigma_axis(ax, long["sigma_f"])
        ax.axhline(0, color="grey", lw=0.8)
    g.set_titles("{col_name}")
    g.figure.suptitle(f"Barriers vs σ_F ({split}; line: mean over pairs; band: min–max)", y=1.03)
    return g.figure


def swap_cost_heatmaps(matrix: pd.DataFrame, layer: str | None = None):
    """Swap-cost matrices T_ij (first seed, one layer, shortest training: untrained when the study has
    epochs 0): rows = data intrinsic dimension k, columns = σ_F."""
    if matrix.empty:
        return _empty("swap-cost heatmaps")
    layer = layer or sorted(matrix.layer.unique())[0]
    arm = int(matrix.epochs.min())  # 0: untrained, the paper's swap-cost arm
    df = matrix[(matrix.layer == layer) & (matrix.seed == matrix.seed.min()) & (matrix.epochs == arm)]
    row_key = "data_k" if (df.data_k >= 0).any() else "dataset"
    rows, cols = sorted(df[row_key].unique()), sorted(df.sigma_f.unique())
    vmax = float(np.nanquantile(df.swap_cost.abs(), 0.99)) or 1.0
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(2.3 * len(cols) + 0.8, 2.2 * len(rows)), squeeze=False)
    im = None
    for r, rv in enumerate(rows):
        for c, cv in enumerate(cols):
            ax = axes[r][c]
            cell = df[(df[row_key] == rv) & (df.sigma_f == cv)]
            if cell.empty:
                ax.set_axis_off()
                continue
            n = int(cell.i.max()) + 1
            t = np.full((n, n), np.nan)
            t[cell.i.to_numpy(), cell.j.to_numpy()] = cell.swap_cost.to_numpy()
            im = ax.imshow(t, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
            off = t[~np.eye(n, dtype=bool)]
            ax.set_title(f"{row_key}={rv}, σ_F={cv:g}\nmedian {np.median(off):.2g}, {np.mean(off < 0):.0%} < 0",
                         fontsize=7)
            ax.set_xticks([])
            ax.set_yticks([])
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.6, label="swap cost T_ij")
    trained = "untrained" if arm == 0 else f"trained {arm} epochs"
    fig.suptitle(f"Swap costs of {layer} ({trained}, seed {int(df.seed.min())}; colour clipped at the 99th "
                 f"percentile of |T|)")
    return fig


def swap_cost_vs_k(summary: pd.DataFrame):
    """The low tail of the swap costs relative to the self costs (the intrinsic-dimension claim), the share of
    cheap swaps and the median swap cost vs the data's intrinsic dimension k, per σ_F; one row per training
    length (0 epochs = untrained)."""
    if summary.empty:
        return _empty("swap cost vs k")
    x = "data_k" if (summary.data_k >= 0).any() else "k"
    df = summary.assign(**{"σ_F": summary.sigma_f.map(lambda v: f"{v:g}"),
                           "arm": summary.epochs.map(lambda e: "untrained" if e == 0 else f"trained {e} epochs")})
    names = {"swap_q10_relative": "q10(T) / mean self cost", "swap_frac_cheap": "share of swaps < mean self cost",
             "swap_median": "median swap cost"}
    long = df.melt(id_vars=[x, "σ_F", "layer", "seed", "arm"], value_vars=list(names), var_name="statistic",
                   value_name="value")
    long["statistic"] = long["statistic"].map(names)
    style = "layer" if long["layer"].nunique() > 1 else None
    row = "arm" if long["arm"].nunique() > 1 else None
    g = sns.relplot(data=long, x=x, y="value", hue="σ_F", style=style, col="statistic", row=row, kind="line",
                    marker="o", errorbar=("pi", 100), facet_kws={"sharey": False}, height=2.8, aspect=1.1)
    for ax in g.axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(long[x].unique()))
        ax.set_xticklabels([f"{v:g}" for v in sorted(long[x].unique())])
        ax.minorticks_off()
        ax.axhline(0, color="grey", lw=0.8)
    g.set_titles("{row_name} | {col_name}" if row else "{col_name}")
    g.set_axis_labels("intrinsic dimension k of the data", "")
    g.figure.suptitle("Swap costs vs k (line: mean over seeds; band: min–max)", y=1.03)
    return g.figure


def barrier_vs_nu(coherence: pd.DataFrame, split: str = "test"):
    """Regression midpoint barrier of the unaligned path vs subspace coherence ν of the inputs."""
    df = coherence[coherence.split == split]
    if df.empty:
        return _empty("barrier vs ν")
    cols = {"regression_midpoint_barrier": "MSE(θ½) − max(MSE_a, MSE_b)",
            "loss_barrier_midpoint": "MSE(θ½) − mean(MSE_a, MSE_b)"}
    long = df.melt(id_vars=["nu", "method", "seed_a", "seed_b"], value_vars=list(cols), var_name="barrier",
                   value_name="value")
    long["barrier"] = long["barrier"].map(cols)
    g = sns.relplot(data=long, x="nu", y="value", hue="method", col="barrier", kind="line", marker="o",
                    errorbar=("pi", 100), facet_kws={"sharey": False}, height=2.8, aspect=1.2)
    for ax in g.axes.flat:
        ax.set_xscale("log")
        ax.axhline(0, color="grey", lw=0.8)
    g.set_titles("{col_name}")
    g.set_axis_labels("subspace coherence ν", f"midpoint barrier ({split})")
    g.figure.suptitle("Midpoint barrier vs ν (line: mean over pairs; band: min–max)", y=1.03)
    return g.figure


# --------------------------------------------------------------------------- width paper: alignment and mechanism
METHOD_ORDER = ("identity", "weight_matching", "activation_matching", "random_permutation")


def _wd_order(*frames) -> list[str]:
    """Weight-decay labels, largest (the default) first, so every panel and figure uses one order and colour."""
    vals = set()
    for f in frames:
        vals |= set(f.weight_decay) if len(f) else set()
    return [f"{v:g}" for v in sorted(vals, reverse=True)]


def _with_wd(df: pd.DataFrame, order: list | None = None) -> pd.DataFrame:
    df = df.copy()
    order = order or _wd_order(df)
    df["weight decay"] = pd.Categorical(df.weight_decay.map(lambda v: f"{v:g}"), categories=order, ordered=True)
    return df


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
        _width_axis(ax)
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
        return _empty("barrier vs width per method")
    df = _with_wd(df)
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
        return _empty("LEWC vs width")
    forms = {"lewc_cos": "LEWC  λ^l f_A + (1−λ)^l f_B", "llfc_cos": "LLFC  λ f_A + (1−λ) f_B",
             "lewc_cos_perturbed": "LEWC of A and a random perturbation R of A (‖θ_R − θ_A‖ = ‖θ_B − θ_A‖)"}
    long = _with_wd(df).melt(id_vars=["width", "layer", "seed_a", "seed_b", "weight decay"],
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
        return _empty("cross-norm ratio vs width")
    df = df.assign(cross_transform_cos_permuted=(df.cross_transform_cos_permuted_a
                                                 + df.cross_transform_cos_permuted_b) / 2)
    names = {"cross_ratio_a": "‖W_A z_B‖/‖W_A z_A‖", "cross_ratio_b": "‖W_B z_A‖/‖W_B z_B‖",
             "cross_cos": "cos(W_A z_B + W_B z_A, W_A z_A + W_B z_B)",
             "cross_transform_cos": "cos((W_A + W_B)(z_A + z_B), W_A z_A + W_B z_B)",
             "cross_transform_cos_permuted": "the same, each model with a relabelled copy of itself"}
    long = _with_wd(df).melt(id_vars=["width", "layer", "seed_a", "seed_b", "weight decay"],
                             value_vars=list(names), var_name="quantity")
    long["quantity"] = long["quantity"].map(names)
    g = sns.relplot(data=long, x="width", y="value", hue="quantity", style="weight decay", col="layer", kind="line",
                    marker="o", errorbar=("pi", 100), height=3, aspect=1.2)
    return _facet_widths(g, "value", "Reciprocal orthogonality vs width (no permutation)", zero=True)


def rank_vs_width(lm: pd.DataFrame):
    """Relative effective rank and rank99 fraction of each hidden layer's weight vs width (mean of A and B)."""
    df = _at_half(lm).copy()
    if df.empty:
        return _empty("rank vs width")
    df["effective rank / min dim"] = (df.erank_rel_a + df.erank_rel_b) / 2
    df["rank99 / min dim"] = (df.rank99_frac_a + df.rank99_frac_b) / 2
    df["active fraction"] = (df.frac_active_a + df.frac_active_b) / 2
    df["active Jaccard A, B"] = df.active_jaccard
    df["Jaccard of independent sets"] = df.active_jaccard_independent
    long = _with_wd(df).melt(id_vars=["width", "layer", "seed_a", "seed_b", "weight decay"],
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
        return _empty("default vs weak weight decay")
    lewc, where = _off_half(lm)
    deep = lewc[lewc.layer >= 2] if len(lewc) and lewc.layer.max() >= 2 else lewc
    m = m.assign(erank=(m.erank_rel_a + m.erank_rel_b) / 2)
    order = _wd_order(b, m)
    palette = dict(zip(order, sns.color_palette("colorblind", len(order)), strict=True))
    panels = [(b, "value", f"{definition} error barrier ({split})", "error barrier"),
              (deep, "lewc_cos", "LEWC cosine", f"LEWC, layers ≥ 2, {where}"),
              (m, "erank", "effective rank / min dim", "relative effective rank")]
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
    for ax, (df, y, label, title) in zip(axes, panels, strict=True):
        if df.empty:
            ax.set_axis_off()
            continue
        sns.lineplot(data=_with_wd(df, order), x="width", y=y, hue="weight decay", style="weight decay",
                     hue_order=order, style_order=order, marker="o", errorbar=("pi", 100), ax=ax, palette=palette)
        _width_axis(ax)
        ax.set_ylabel(label)
        ax.set_title(title, fontsize=9)
    axes[0].axhline(0, color="grey", lw=0.8)
    fig.suptitle("Default vs weak weight decay (no permutation; mean over pairs, band: min–max)", y=1.03)
    fig.tight_layout()
    return fig
