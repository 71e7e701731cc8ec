"""Figures of panels drawn without pyplot: a grid of axes on an Agg canvas, and the finish every
panel gets (title, step axis, grid, legend). Shared by the plot commands and the experiments."""

from __future__ import annotations

import math


def figure_grid(num_panels: int, columns: int):
    """(figure, axes): `num_panels` axes in rows of `columns`, the grid's spare cells hidden."""
    # The object API with an Agg canvas: no pyplot state, no global backend switch.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = max(1, math.ceil(num_panels / columns))
    figure = Figure(figsize=(6.5 * columns, 3.4 * rows), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for extra in axes[num_panels:]:
        extra.set_visible(False)
    return figure, axes[:num_panels]


def finish_axes(ax, title: str) -> None:
    """`title` unless the panel has one, the step axis, a light grid, a legend of labelled lines."""
    if not ax.get_title():
        ax.set_title(title, fontsize=10)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
