"""The experiments' figures (matplotlib, Agg): PNG files for docs and inline SVG for the HTML.

- predict: ACR_100 against final accuracy, coloured by level, with our OLS line and the paper's;
- compare: accuracy against completions generated (mean and 95% band over seeds), and the raw
  ACR against completions generated;
- ablate: final accuracy per arm with its interval.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from rlvitals.lab.presets import PAPER
from rlvitals.lab.tasks import LEVEL_TARGETS

__all__ = ["draw"]


def _n(x: Any, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def draw(name: str, doc: dict[str, Any], results: list[dict[str, Any]], out: Path) -> dict:
    """PNG files and inline SVG strings of the experiment's figures."""
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    figs = {"predict": _fig_predict, "compare": _fig_compare, "ablate": _fig_ablate}[name](
        doc, results, plt
    )
    files, svgs = {}, {}
    for key, fig in figs.items():
        png = out / f"{name}_{key}.png"
        fig.savefig(png, dpi=90, bbox_inches="tight")
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight")
        svgs[f"{name}_{key}.png"] = re.sub(r"^.*?<svg", "<svg", buf.getvalue(), flags=re.S)
        plt.close(fig)
        files[key] = str(png)
    return {"files": files, "svg": svgs}


def _fig_predict(doc, results, plt) -> dict:
    a = doc["analysis"]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    cmap = plt.get_cmap("viridis")
    levels = sorted({p["level"] for p in a["points"]})
    for i, lvl in enumerate(levels):
        pts = [p for p in a["points"] if p["level"] == lvl and p["acr_100"] is not None]
        ax.scatter(
            [p["acr_100"] for p in pts],
            [100 * p["final_accuracy"] for p in pts],
            s=18,
            color=cmap(i / max(1, len(levels) - 1)),  # one colour per level shown, LM included
            label=f"L{lvl} ({100 * LEVEL_TARGETS[lvl]:.0f}%)" if lvl < len(LEVEL_TARGETS) else "LM",
        )
    xs = [0.0, 1.0]
    ols = a["ols"]
    if ols["slope"] is not None:
        ax.plot(
            xs, [ols["intercept"] + ols["slope"] * x for x in xs], "k-", lw=1.2, label="OLS (lab)"
        )
    p = PAPER["predict"]
    ax.plot(
        xs,
        [p["intercept"] + p["slope"] * x for x in xs],
        "r--",
        lw=1.2,
        label="paper: 51.4 − 29.6 x",
    )
    early = a.get("early")  # predict-v2: the first share of a fixed budget, not 100 steps
    ax.set_xlabel(
        f"early ACR (mean raw ACR over the first {100 * early:.0f}% of the budget)"
        if early
        else "ACR_100 (mean ACR of the first 100 steps)"
    )
    ax.set_ylabel("final held-out accuracy (points)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, ncol=2)
    r = a["pearson"]
    ax.set_title(
        f"r = {_n(r['r'], 2)} [{_n(r['lo'], 2)}, {_n(r['hi'], 2)}], n = {r['n']}", fontsize=9
    )
    return {"scatter": fig}


def _fig_compare(doc, results, plt) -> dict:
    import numpy as np

    a = doc["analysis"]
    fig1, ax = plt.subplots(figsize=(6.4, 4.2))
    for m, arm in a["arms"].items():
        x = [p["generated"] for p in arm["curve"]]
        acc = [p["accuracy"] for p in arm["curve"]]
        y = [ci["mean"] for ci in acc]
        lo, hi = ([ci[k] if ci[k] is not None else ci["mean"] for ci in acc] for k in ("lo", "hi"))
        line = ax.plot(x, y, marker="o", ms=3, lw=1.2, label=m)[0]
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
    ax.set_xlabel("completions generated")
    ax.set_ylabel("held-out accuracy (points)")
    ax.legend(fontsize=7)
    fig2, ax2 = plt.subplots(figsize=(6.4, 4.2))
    budget = doc["preset_settings"]["run"]["budget"]
    grid = np.linspace(0, budget, 60)
    for m in a["arms"]:
        curves = []
        for r in results:
            if r["summary"]["method"] != m or not r["steps"]:
                continue
            g = np.array([s["generated"] for s in r["steps"]], dtype=float)
            acr = np.array([s["acr"] for s in r["steps"]], dtype=float)
            k = min(10, acr.size)
            smooth = np.convolve(acr, np.ones(k) / k, mode="valid")
            curves.append(np.interp(grid, g[k - 1 :], smooth, left=np.nan, right=np.nan))
        if curves:
            with warnings.catch_warnings():  # grid points before a run's first 10 steps
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(np.array(curves), axis=0)
            ax2.plot(grid, mean, lw=1.2, label=m)
    ax2.set_xlabel("completions generated")
    ax2.set_ylabel("raw ACR (10-step mean, mean over seeds)")
    ax2.set_ylim(0, 1)
    ax2.legend(fontsize=7)
    return {"accuracy": fig1, "acr": fig2}


def _fig_ablate(doc, results, plt) -> dict:
    a = doc["analysis"]
    names = [v["name"] for v in a["variants"]]
    fig, ax = plt.subplots(figsize=(7.0, 3.8))
    acc = [a["arms"][m]["final_accuracy"] for m in names]
    means = [ci["mean"] or 0 for ci in acc]
    los = [(ci["mean"] or 0) - (ci["lo"] or 0) if ci["lo"] is not None else 0 for ci in acc]
    his = [(ci["hi"] or 0) - (ci["mean"] or 0) if ci["hi"] is not None else 0 for ci in acc]
    colors = {
        "reference": "grey",
        "default": "tab:red",
        "virtual": "tab:blue",
        "threshold": "tab:green",
        "alpha": "tab:purple",
    }
    ax.bar(
        range(len(names)),
        means,
        yerr=[los, his],
        color=[colors.get(v["axis"], "tab:blue") for v in a["variants"]],
        capsize=3,
    )
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("final held-out accuracy (points)")
    return {"bars": fig}
