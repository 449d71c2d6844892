"""Pictures of private answers with their intervals (`ektelo run --plot`):
a histogram as bars with error bars, a CDF as a line in its band, a
two-attribute table or marginal as a heat map whose ticks are the
attributes' values (labels, codes or bins), and many marginals as a grid of
small heat maps (bars for 1-way ones), one titled panel per marginal. Public
post-processing of released answers; matplotlib is the `plot` extra."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["answer_figure", "plot_answers"]


def plot_answers(frame: pd.DataFrame, question: Any, path: Path) -> Path:
    """Draw `frame` (a session answer) for `question` to `path`."""
    import matplotlib.pyplot as plt

    fig = answer_figure(frame, question)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def answer_figure(frame: pd.DataFrame, question: Any) -> Any:
    """The matplotlib Figure of `frame` (a session answer) for `question`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "marginal" in frame and frame["marginal"].nunique() > 1:
        return _marginal_grid(frame, plt)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    level = 100 * (1 - float(frame.attrs.get("alpha", 0.05)))
    over = " × ".join(question.attributes)
    derived = getattr(question, "derived", None)
    kind = {"identity": "histogram", "prefix": "CDF"}.get(question.kind, question.kind)
    if derived is not None:  # sums, means, quantiles: bars with their intervals
        kind = "quantiles" if derived.what == "quantile" else "aggregates"
    title = f"{kind} over {over} — plan {frame.attrs.get('plan')}"
    has_ci = frame["ci_low"].notna().any()
    label_cols = [c for c in frame.columns if c not in
                  ("answer", "std_error", "ci_low", "ci_high", "ci_method", "marginal", "note")]
    if question.kind == "prefix" and derived is None:
        x_col = label_cols[0]
        for key, part in _groups(frame, label_cols[1:]):
            xs = np.arange(len(part)) if part[x_col].dtype == object else part[x_col]
            line = ax.plot(xs, part["answer"], label=key or "CDF")[0]
            if has_ci:
                ax.fill_between(xs, part["ci_low"], part["ci_high"], alpha=0.25,
                                color=line.get_color())
        ax.set_xlabel(x_col)
        ax.set_ylabel("count ≤ x")
        if len(label_cols) > 1:
            ax.legend(fontsize=8)
    elif derived is None and len(question.attributes) == 2 and question.kind in (
            "identity", "marginals") and (
        "marginal" not in frame or frame["marginal"].nunique() == 1
    ):
        a, b = question.attributes
        image = _heat_map(ax, frame, a, b)
        fig.colorbar(image, ax=ax, label="count")
        if has_ci:
            ax.set_title(f"{title}\nmedian ±{_median_half(frame):.3g} ({level:g}% interval)",
                         fontsize=9)
    else:
        names = [", ".join(str(v) for v in row if not _na(v))
                 for row in frame[label_cols].itertuples(index=False)]
        xs = np.arange(len(frame))
        yerr = None
        if has_ci:
            yerr = np.vstack(
                [frame["answer"] - frame["ci_low"], frame["ci_high"] - frame["answer"]]
            )
            yerr = np.clip(np.nan_to_num(yerr), 0, None)
        ax.bar(xs, frame["answer"], yerr=yerr, capsize=2, color="tab:blue", ecolor="black")
        if len(frame) <= 40:
            ax.set_xticks(xs, names, rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(question.derived.attribute if derived is not None else "count")
    if not ax.get_title():
        ax.set_title(f"{title}" + (f" ({level:g}% intervals)" if has_ci else
                                   " (no interval: see ci_method)"), fontsize=9)
    fig.tight_layout()
    return fig


def _labels(frame: pd.DataFrame, attr: str) -> pd.Series:
    """The values of `attr` in `frame` as text: its label or code column, or a
    bin's `[lo, hi)` from its `<attr>_lo`/`<attr>_hi` columns."""
    if attr in frame:
        return frame[attr].astype(object).map(_text)
    lo, hi = frame[f"{attr}_lo"], frame[f"{attr}_hi"]
    return pd.Series([f"[{_text(a)}, {_text(b)})" for a, b in zip(lo, hi, strict=True)],
                     index=frame.index)


def _text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _ticks(ax: Any, axis: str, labels: list[str], most: int = 25) -> None:
    """Ticks at the cells' centres (0, 1, …), labelled by the values; at most
    `most` labels (every k-th) so that a long axis stays readable."""
    step = max(1, -(-len(labels) // most))
    where = list(range(0, len(labels), step))
    shown = [labels[i] for i in where]
    if axis == "x":
        ax.set_xticks(where, shown, rotation=60 if max(map(len, shown), default=0) > 3 else 0,
                      ha="right" if max(map(len, shown), default=0) > 3 else "center",
                      fontsize=7)
    else:
        ax.set_yticks(where, shown, fontsize=7)


def _heat_map(ax: Any, frame: pd.DataFrame, a: str, b: str, most: int = 25) -> Any:
    """`frame`'s answers over attributes a (rows) × b (columns) as a heat
    map, in the answers' own order, with the values as tick labels."""
    rows, cols = _labels(frame, a), _labels(frame, b)
    row_order, col_order = list(dict.fromkeys(rows)), list(dict.fromkeys(cols))
    grid = (pd.DataFrame({"r": rows, "c": cols, "v": frame["answer"].to_numpy()})
            .pivot(index="r", columns="c", values="v").reindex(index=row_order, columns=col_order))
    image = ax.imshow(grid.to_numpy(dtype=float), aspect="auto", cmap="viridis",
                      interpolation="nearest")
    _ticks(ax, "x", col_order, most)
    _ticks(ax, "y", row_order, most)
    ax.set_ylabel(a)
    ax.set_xlabel(b)
    return image


def _marginal_grid(frame: pd.DataFrame, plt: Any) -> Any:
    """Many marginals: a grid of small panels, each titled with its
    attributes — a heat map per 2-way marginal, bars per 1-way one (and, for
    K ≥ 3, the marginal's cells as bars)."""
    names = list(dict.fromkeys(frame["marginal"]))
    ncols = int(np.ceil(np.sqrt(len(names))))
    nrows = int(np.ceil(len(names) / ncols))
    side = min(3.2, max(1.8, 24 / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(side * ncols, side * nrows), squeeze=False)
    for ax, name in zip(axes.ravel(), names, strict=False):
        part = frame[frame["marginal"] == name]
        attrs = name.split("×")
        if len(attrs) == 2:
            _heat_map(ax, part, attrs[0], attrs[1], most=10)
        else:
            labels = _labels(part, attrs[0]) if len(attrs) == 1 else pd.Series(
                [", ".join(t) for t in zip(*(_labels(part, a) for a in attrs), strict=True)])
            ax.bar(np.arange(len(part)), part["answer"], color="tab:blue")
            _ticks(ax, "x", list(labels), 10)
            ax.set_xlabel(" × ".join(attrs), fontsize=7)
        ax.set_title(" × ".join(attrs), fontsize=8)
        ax.xaxis.label.set_size(7)
        ax.yaxis.label.set_size(7)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    plan = frame.attrs.get("plan")
    fig.suptitle(f"{len(names)} marginals — plan {plan} (colour: count; intervals: see "
                 f"ci_method)", fontsize=10)
    fig.tight_layout()
    return fig


def _na(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))


def _groups(frame: pd.DataFrame, by: list[str]) -> list[tuple[str, pd.DataFrame]]:
    if not by:
        return [("", frame)]
    keys = frame[by].astype(object).where(frame[by].notna(), "all").astype(str)
    label = keys.apply(lambda r: ", ".join(f"{k}={v}" for k, v in r.items()), axis=1)
    return [(str(k), part) for k, part in frame.groupby(label, sort=False)]


def _median_half(frame: pd.DataFrame) -> float:
    return float(np.nanmedian(frame["ci_high"] - frame["answer"]))
