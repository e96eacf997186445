"""The ten result views, one module each, in tab order: ``summary`` (1), ``conditions`` (2), ``cdf`` (3),
``curves`` (4), ``histograms`` (5), ``runs`` (6), ``learning`` (7, aggregate learning curves), ``runstatus``
(8, Status: every run's status as `saferl status` shows it), ``profile`` (9, run-level performance
profiles), ``front`` (0, the reward-cost front across bounds). Shared: ``base`` (the :class:`ResultView`
contract), ``table`` (table widgets, the sortable and filterable mixin), ``plot`` (plot layout, the
condition cycler of Curves and Histograms), ``format`` (on-screen numbers and colours).
"""

from __future__ import annotations

from saferl_tui.views.base import ResultView
from saferl_tui.views.cdf import CdfView
from saferl_tui.views.conditions import ConditionsView
from saferl_tui.views.curves import CurvesView
from saferl_tui.views.front import FrontView
from saferl_tui.views.histograms import HistogramsView
from saferl_tui.views.learning import LearningView
from saferl_tui.views.profile import ProfileView
from saferl_tui.views.runs import RunsView
from saferl_tui.views.runstatus import RunStatusView
from saferl_tui.views.summary import SummaryView

VIEW_CLASSES: tuple[type[ResultView], ...] = (SummaryView, ConditionsView, CdfView, CurvesView, HistogramsView,
                                              RunsView, LearningView, RunStatusView, ProfileView, FrontView)
"""The views in tab order (their KEY is 1..9, then 0)."""

__all__ = ["VIEW_CLASSES", "CdfView", "ConditionsView", "CurvesView", "FrontView", "HistogramsView", "LearningView",
           "ProfileView", "RunStatusView", "ResultView", "RunsView", "SummaryView"]
