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


# the identifiability figures' panels: levels of the matching objective and barriers of a path (table columns)
OBJECTIVE_LEVELS = {"optimal": "optimal π*", "identity": "identity", "random_mean": "random (mean)"}
LMC_BARRIERS = {"error_barrier_entezari": "error barrier", "loss_barrier_entezari": "loss barrier",
                "relative_accuracy_barrier": "relative accuracy barrier"}


def objective_vs_sigma_f(matching: pd.DataFrame):
    """Activation-matching objective of the optimal, identity and random permutations vs σ_F, per layer."""
    matching = matching[(matching.feature == "post_activation") & (matching.similarity == "pearson")]
    if matching.empty:
        return _empty("objective vs σ_F")
    if _by_variant(matching):
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
        return _empty("barrier vs σ_F")
    if _by_variant(df):
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


def swap_cost_heatmaps(matrix: pd.DataFrame, layer: str | None = None, value: str = "swap_cost"):
    """Swap-cost matrices T_ij (first seed, one layer, shortest training: untrained when the study has
    epochs 0): rows = data intrinsic dimension k, columns = σ_F. A study without a k sweep (e.g. network
    variants on MNIST) gets every layer of every variant (``swap_cost_layers``)."""
    if matrix.empty:
        return _empty("swap-cost heatmaps")
    if not (matrix.data_k >= 0).any() and (matrix.symmetry.nunique() > 1 or matrix.layer.nunique() > 1):
        return swap_cost_layers(matrix, value)
    layer = layer or sorted(matrix.layer.unique())[0]
    arm = int(matrix.epochs.min())  # 0: untrained, the paper's swap-cost arm
    df = matrix[(matrix.layer == layer) & (matrix.seed == matrix.seed.min()) & (matrix.epochs == arm)]
    row_key = "data_k" if (df.data_k >= 0).any() else "dataset"
    rows, cols = sorted(df[row_key].unique()), sorted(df.sigma_f.unique())
    vmax = float(np.nanquantile(df[value].abs(), 0.99)) or 1.0
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
            t[cell.i.to_numpy(), cell.j.to_numpy()] = cell[value].to_numpy()
            im = ax.imshow(t, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
            off = t[~np.eye(n, dtype=bool)]
            ax.set_title(f"{row_key}={rv}, σ_F={cv:g}\nmedian {np.median(off):.2g}, {np.mean(off < 0):.0%} < 0",
                         fontsize=7)
            ax.set_xticks([])
            ax.set_yticks([])
    if im is not None:
        fig.colorbar(im, ax=axes, shrink=0.6, label="swap cost T_ij")
    trained = "untrained" if arm == 0 else f"trained {arm} epochs"
    est = "ridge regression" if value == "swap_cost_ridge" else "closed form"
    fig.suptitle(f"Swap costs of {layer} ({est}, {trained}, seed {int(df.seed.min())}; colour clipped at the 99th "
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


KIND_LABELS = {"standard": "standard", "w_asymmetric": "W", "syre": "SyRe", "sigma_asymmetric": "σ-asym"}


def variant_label(symmetry: str, sigma_f: float) -> str:
    """A network variant's label: its symmetry kind, with σ_F for the kinds that have fixed offsets."""
    name = KIND_LABELS.get(symmetry, symmetry)
    return f"{name} σ_F={sigma_f:g}" if symmetry in ("w_asymmetric", "syre") else name


def _variants(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``df`` with a ``variant`` column, and the variants in a fixed order (kind, then σ_F)."""
    df = df.assign(variant=[variant_label(k, v) for k, v in zip(df.symmetry, df.sigma_f)])
    kinds = list(KIND_LABELS)
    order = (df[["symmetry", "sigma_f", "variant"]].drop_duplicates()
             .assign(r=lambda d: d.symmetry.map(lambda k: kinds.index(k) if k in kinds else len(kinds)))
             .sort_values(["r", "sigma_f"]).variant.tolist())
    return df, order


def _dodge(df: pd.DataFrame, hue: str, width: float = 0.3) -> float | bool:
    """Seaborn's point dodge, off for a single hue level (it divides by the number of levels − 1)."""
    return width if df[hue].nunique() > 1 else False


def _by_variant(df: pd.DataFrame) -> bool:
    """Studies that sweep the symmetry kind are drawn against the variant, not against σ_F."""
    return df.symmetry.nunique() > 1


def matching_modes(matching: pd.DataFrame):
    """The normalized identity objective (identity − random)/(optimal − random) at every feature point and with
    every similarity the study measured (the authors' matching modes), vs σ_F or per network variant."""
    if matching.empty:
        return _empty("activation-matching modes")
    df = matching.assign(mode=matching.feature + " / " + matching.similarity)
    if _by_variant(df):
        df, order = _variants(df)
        g = sns.catplot(data=df, x="variant", y="identity_normalized", hue="mode", col="layer", kind="point",
                        order=order, errorbar=("pi", 100), dodge=_dodge(df, "mode"), height=3, aspect=1.2)
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
        return _empty("objective per variant")
    df, order = _variants(df)
    long = df.melt(id_vars=["variant", "layer", "seed_a", "seed_b"], value_vars=list(OBJECTIVE_LEVELS),
                   var_name="permutation", value_name="objective")
    long["permutation"] = long["permutation"].map(OBJECTIVE_LEVELS)
    g = sns.catplot(data=long, x="variant", y="objective", hue="permutation", col="layer", kind="point", order=order,
                    errorbar=("pi", 100), dodge=_dodge(long, "permutation"), height=3, aspect=1.2)
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
        return _empty("barrier per variant")
    df, order = _variants(df)
    long = df.melt(id_vars=["variant", "method", "seed_a", "seed_b"], value_vars=list(LMC_BARRIERS), var_name="metric",
                   value_name="value").dropna(subset=["value"])
    long["metric"] = long["metric"].map(LMC_BARRIERS)
    long["method"] = long["method"].map({"identity": "unaligned", "activation_matching": "aligned (AM)"})
    g = sns.catplot(data=long, x="variant", y="value", hue="method", col="metric", kind="point", order=order,
                    errorbar=("pi", 100), dodge=_dodge(long, "method"), sharey=False, height=3, aspect=1.2)
    for ax in g.axes.flat:
        ax.tick_params(axis="x", rotation=30)
        ax.axhline(0, color="grey", lw=0.8)
    g.set_titles("{col_name}")
    g.figure.suptitle(f"Barriers per network variant ({split}; mean over pairs; band: min–max)", y=1.04)
    return g.figure


def _heatmap_grid(cells: list[tuple[str, str, pd.DataFrame]], value: str, title: str, n_rows: int, n_cols: int):
    """A grid of T_ij heatmaps; each cell's colour scale is its own, centred on 0 (blue: a swap cheaper than keeping
    the assignment), clipped at the 99th percentile of |T| (the authors colour each matrix on its own scale).
    Costs below 1e-9 of the largest in the figure are rounding noise of an exact zero (standard layers: T = 0) and
    are drawn as 0."""
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(2.4 * n_cols + 0.4, 2.3 * n_rows), squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    scale = max((float(np.nanmax(np.abs(cell[value].to_numpy()))) for _, _, cell in cells), default=0.0)
    eps = 1e-9 * scale
    for r, c, cell in cells:
        ax = axes[r][c]
        n = int(cell.i.max()) + 1
        t = np.full((n, n), np.nan)
        t[cell.i.to_numpy(), cell.j.to_numpy()] = cell[value].to_numpy()
        t[np.abs(t) <= eps] = 0.0
        vmax = float(np.nanquantile(np.abs(t), 0.99)) or 1.0
        im = ax.imshow(t, cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest")
        off = t[~np.eye(n, dtype=bool)]
        ax.set_axis_on()
        stats = ("T = 0" if not np.nanmax(np.abs(off), initial=0.0) else
                 f"median {np.nanmedian(off):.2g}, {np.mean(off < 0):.0%} < 0")
        ax.set_title(f"{cell.attrs.get('label', '')}\n{stats}", fontsize=7)
        ax.set_xticks([])
        ax.set_yticks([])
        if np.nanmax(np.abs(off), initial=0.0):
            fig.colorbar(im, ax=ax, shrink=0.7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def swap_cost_layers(matrix: pd.DataFrame, value: str = "swap_cost"):
    """Swap-cost matrices of every layer (columns, the output layer included where measured) of each network
    variant (rows), first seed: the authors' MNIST heatmaps. ``value``: ``swap_cost`` (closed form) or
    ``swap_cost_ridge``."""
    est = "ridge regression" if value == "swap_cost_ridge" else "closed form"
    df = matrix.dropna(subset=[value])
    if df.empty:
        return _empty(f"swap costs ({est})")
    df = df[(df.seed == df.seed.min()) & (df.epochs == df.epochs.max())]
    df, order = _variants(df)
    layers = sorted(df.layer.unique(), key=lambda n: (n == "head", n))
    cells = []
    for r, v in enumerate(order):
        for c, layer in enumerate(layers):
            cell = df[(df.variant == v) & (df.layer == layer)]
            if len(cell):
                cell = cell.copy()
                cell.attrs["label"] = f"{v}, {layer}"
                cells.append((r, c, cell))
    return _heatmap_grid(cells, value, f"Swap costs T_ij ({est}) per layer, seed {int(df.seed.min())}",
                         len(order), len(layers))


def swap_cost_ridge_heatmaps(matrix: pd.DataFrame):
    """The ridge-regression swap costs in the layout of the study's closed-form heatmaps."""
    if matrix.empty or matrix.swap_cost_ridge.isna().all():
        return _empty("ridge-regression swap costs (analysis.ridge_beta not set)")
    if (matrix.data_k >= 0).any():
        return swap_cost_heatmaps(matrix, value="swap_cost_ridge")
    return swap_cost_layers(matrix, "swap_cost_ridge")


def ridge_vs_closed_form(matrix: pd.DataFrame, summary: pd.DataFrame):
    """Off-diagonal swap costs: ridge-regression estimate against the closed form, per layer (first seed)."""
    df = matrix.dropna(subset=["swap_cost_ridge"])
    df = df[(df.i != df.j) & (df.seed == df.seed.min())] if len(df) else df
    if df.empty:
        return _empty("ridge vs closed-form swap costs (analysis.ridge_beta not set)")
    df, order = _variants(df)
    if (df.data_k >= 0).any():
        df = df.assign(variant=df.variant + ", k=" + df.data_k.astype(str))
        order = sorted(df.variant.unique())
    layers = sorted(df.layer.unique(), key=lambda n: (n == "head", n))
    fig, axes = plt.subplots(1, len(layers), figsize=(3.2 * len(layers), 3.0), squeeze=False)
    for ax, layer in zip(axes[0], layers):
        sub = df[df.layer == layer]
        if len(sub) > 4000:  # a seeded subsample keeps the figure light; the table holds every pair
            sub = sub.sample(4000, random_state=0)
        sns.scatterplot(data=sub, x="swap_cost", y="swap_cost_ridge", hue="variant", hue_order=[o for o in order
                        if o in set(sub.variant)], s=6, linewidth=0, ax=ax, legend=ax is axes[0][-1],
                        rasterized=True)
        rho = summary[summary.layer == layer].ridge_closed_form_spearman.mean()
        ax.set_title(f"{layer}: mean Spearman ρ = {rho:.2f}", fontsize=8)
        ax.axhline(0, color="grey", lw=0.6)
        ax.axvline(0, color="grey", lw=0.6)
        ax.set_xlabel("T_ij closed form")
        ax.set_ylabel("T_ij ridge")
    if axes[0][-1].get_legend() is not None:
        sns.move_legend(axes[0][-1], "upper left", bbox_to_anchor=(1, 1), fontsize=6)
    beta = summary.ridge_beta.dropna().unique()
    fig.suptitle(f"Ridge-regression (β = {', '.join(f'{b:g}' for b in beta)}) vs closed-form swap costs", y=1.03)
    fig.tight_layout()
    return fig


def representation_geometry(summary: pd.DataFrame):
    """Coherence ν of each layer's input subspace (with its floor k/d) and the anisotropy ‖S_i − p·I‖₂ of the layer's
    mask on it (mean over neurons, with the matrix-Bernstein level), per layer and network variant."""
    if summary.empty:
        return _empty("coherence and anisotropy of the layer inputs")
    df, order = _variants(summary[summary.epochs == summary.epochs.max()])
    if (df.data_k >= 0).any():
        df = df.assign(variant=df.variant + ", k=" + df.data_k.astype(str))
        order = sorted(df.variant.unique())
    layers = sorted(df.layer.unique(), key=lambda n: (n == "head", n))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    sns.pointplot(data=df, x="layer", y="input_coherence", hue="variant", order=layers, hue_order=order,
                  errorbar=("pi", 100), dodge=_dodge(df, "variant"), ax=axes[0])
    floor = df.groupby("layer").input_coherence_min.mean().reindex(layers)
    axes[0].plot(range(len(layers)), floor.to_numpy(), "k:", label="k/d (incoherent floor)")
    axes[0].set_ylabel("subspace coherence ν of the layer input")
    axes[0].set_yscale("log")
    sns.pointplot(data=df, x="layer", y="anisotropy_mean", hue="variant", order=layers, hue_order=order,
                  errorbar=("pi", 100), dodge=_dodge(df, "variant"), ax=axes[1], legend=False)
    bound = df.groupby("layer").anisotropy_bound.mean().reindex(layers)
    axes[1].plot(range(len(layers)), bound.to_numpy(), "k:", label="Bernstein level (δ)")
    axes[1].set_ylabel("mean anisotropy ‖S_i − p·I‖₂")
    for ax in axes:
        ax.tick_params(axis="x", rotation=30)
        ax.legend(fontsize=6)
    epochs = int(df.epochs.max())
    fig.suptitle(f"Intermediate representations ({'untrained' if epochs == 0 else f'trained {epochs} epochs'}; "
                 f"mean over seeds, band: min–max)", y=1.02)
    fig.tight_layout()
    return fig


def lmc_vs_k(drops: pd.DataFrame, paper: dict):
    """Unaligned relative accuracy drop vs the data's intrinsic dimension k per σ_F, with the paper's values."""
    if drops.empty:
        return _empty("unaligned accuracy drop vs k")
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
