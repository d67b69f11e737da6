"""Figures of the identifiability paper's realization (swap) costs and input geometry: cost heatmaps, costs vs k,
the ridge estimate beside the closed form, coherence and anisotropy, barriers vs coherence ν."""
from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns

from lmcflow.figures.common import empty, plt
from lmcflow.figures.identifiability import dodge, variants


def swap_cost_heatmaps(matrix: pd.DataFrame, layer: str | None = None, value: str = "swap_cost"):
    """Swap-cost matrices T_ij (first seed, one layer, shortest training: untrained when the study has
    epochs 0): rows = data intrinsic dimension k, columns = σ_F. A study without a k sweep (e.g. network
    variants on MNIST) gets every layer of every variant (``swap_cost_layers``)."""
    if matrix.empty:
        return empty("swap-cost heatmaps")
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
        return empty("swap cost vs k")
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
        return empty("barrier vs ν")
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
        return empty(f"swap costs ({est})")
    df = df[(df.seed == df.seed.min()) & (df.epochs == df.epochs.max())]
    df, order = variants(df)
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
        return empty("ridge-regression swap costs (analysis.ridge_beta not set)")
    if (matrix.data_k >= 0).any():
        return swap_cost_heatmaps(matrix, value="swap_cost_ridge")
    return swap_cost_layers(matrix, "swap_cost_ridge")


def ridge_vs_closed_form(matrix: pd.DataFrame, summary: pd.DataFrame):
    """Off-diagonal swap costs: ridge-regression estimate against the closed form, per layer (first seed)."""
    df = matrix.dropna(subset=["swap_cost_ridge"])
    df = df[(df.i != df.j) & (df.seed == df.seed.min())] if len(df) else df
    if df.empty:
        return empty("ridge vs closed-form swap costs (analysis.ridge_beta not set)")
    df, order = variants(df)
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
        return empty("coherence and anisotropy of the layer inputs")
    df, order = variants(summary[summary.epochs == summary.epochs.max()])
    if (df.data_k >= 0).any():
        df = df.assign(variant=df.variant + ", k=" + df.data_k.astype(str))
        order = sorted(df.variant.unique())
    layers = sorted(df.layer.unique(), key=lambda n: (n == "head", n))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    sns.pointplot(data=df, x="layer", y="input_coherence", hue="variant", order=layers, hue_order=order,
                  errorbar=("pi", 100), dodge=dodge(df, "variant"), ax=axes[0])
    floor = df.groupby("layer").input_coherence_min.mean().reindex(layers)
    axes[0].plot(range(len(layers)), floor.to_numpy(), "k:", label="k/d (incoherent floor)")
    axes[0].set_ylabel("subspace coherence ν of the layer input")
    axes[0].set_yscale("log")
    sns.pointplot(data=df, x="layer", y="anisotropy_mean", hue="variant", order=layers, hue_order=order,
                  errorbar=("pi", 100), dodge=dodge(df, "variant"), ax=axes[1], legend=False)
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


