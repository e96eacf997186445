"""The render wing's names that the command line offers as choices: table kinds and formats, LaTeX and figure
styles, the default moving-average window. Kept apart from the modules that render (xarray,
matplotlib) so that ``saferl --help`` and argument errors load nothing heavy; those modules import them from here.
"""

from __future__ import annotations

TABLE_KINDS = ("aggregate", "conditions", "cdf", "poi", "gap", "profile", "front")
"""The tables of `saferl report` (`cube.render.text.KINDS`)."""
TABLE_FORMATS = ("table", "csv", "json", "markdown", "latex")
"""The formats of a table (`cube.render.text.FORMATS`)."""
LATEX_STYLES = ("default", "paper")
"""LaTeX layouts (`cube.render.latex.STYLES`)."""

DEFAULT_WINDOW = 5
"""Curves: the trailing moving-average window in iterates when none is given (the paper's; `saferl plot` cuts it
to a cube's iterates)."""
FIGURE_KINDS = ("cdf", "curves", "hist", "intervals", "poi", "aggregate-curve", "profile", "front")
FIGURE_STYLES = ("paper", "screen")
FIGURE_FORMATS = ("pdf", "png", "svg")
