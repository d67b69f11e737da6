"""Figures of the width paper's extensions: REPAIR against temperature calibration, the N-model average against
the N-model ensemble (claims repair-vs-calibration and many-model-ensemble)."""
from __future__ import annotations

import pandas as pd
import seaborn as sns

from lmcflow.figures.common import empty, width_axis

ARMS = {(False, True): "calibration", (True, False): "REPAIR", (True, True): "both"}


def repair_vs_calibration(barriers: pd.DataFrame, definition: str = "entezari", split: str = "test"):
    """Per width and merge method, the fraction of the plain loss barrier removed by calibration, by REPAIR and by
    both: 1 − (mean barrier of the arm) / (mean plain barrier) over the seed pairs."""
    df = barriers[(barriers.definition == definition) & (barriers.split == split) & (barriers.metric == "loss")]
    if df.empty or df["repair"].nunique() < 2:
        return empty("REPAIR vs calibration")
    keys = ["method", "weight_decay", "width"]
    means = df.groupby(keys + ["repair", "calibrated"])["value"].mean().unstack(["repair", "calibrated"])
    rows = []
    for key, r in means.iterrows():
        plain = r.get((False, False))
        for arm, name in ARMS.items():
            if arm in r and plain and plain > 0:
                rows.append(dict(zip(keys, key, strict=True)) | {"arm": name, "removed": 1 - r[arm] / plain})
    if not rows:
        return empty("REPAIR vs calibration")
    out = pd.DataFrame(rows)
    g = sns.relplot(data=out, x="width", y="removed", hue="arm", col="method", kind="line", marker="o",
                    height=3, aspect=1.2)
    for ax in g.axes.flat:
        width_axis(ax)
        ax.axhline(0, color="grey", lw=0.8)
        ax.axhline(1, color="grey", lw=0.8, ls=":")
    g.set_ylabels(f"fraction of the plain {definition} loss barrier removed")
    g.set_titles(col_template="{col_name}")
    g.figure.suptitle("What calibration, REPAIR and both remove of the plain barrier", y=1.03)
    return g.figure


def many_model_ensemble(many: pd.DataFrame, split: str = "test", calibrated: bool = True):
    """Calibrated test loss of the N-model merge (per method, plain and REPAIR'd), the mean endpoint and the
    N-model ensemble against width, one panel per N."""
    df = many[many.calibrated == calibrated]
    if df.empty:
        return empty("N-model average vs ensemble")
    rows = []
    for _, r in df.iterrows():
        merged = f"{r['method']} average" + (" + REPAIR" if r["repair"] else "")
        base = {"width": r["width"], "N": int(r["n_models"])}
        rows.append(base | {"model": merged, "loss": r[f"merged_{split}_loss"]})
        if r["method"] == df["method"].iloc[0] and not r["repair"]:
            rows.append(base | {"model": "mean endpoint", "loss": r[f"endpoint_{split}_loss"]})
            rows.append(base | {"model": "ensemble", "loss": r[f"ensemble_{split}_loss"]})
    out = pd.DataFrame(rows)
    g = sns.relplot(data=out, x="width", y="loss", hue="model", col="N", kind="line", marker="o",
                    errorbar=("pi", 100), height=3, aspect=1.2)
    for ax in g.axes.flat:
        width_axis(ax)
    g.set_ylabels(f"{'calibrated ' if calibrated else ''}{split} loss")
    g.set_titles(col_template="N = {col_name} models")
    g.figure.suptitle("N-model average vs N-model ensemble (line: mean over seed subsets; band: min–max)", y=1.03)
    return g.figure
