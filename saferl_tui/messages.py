"""Typed messages that flow up the DOM (widgets -> screen -> app).

Attributes flow down (the app passes the export directory, the demo builder and the scheduler into the
screen; the screen sets reactive attributes on the views); these messages flow up. Workers post
:class:`CubeLoaded`, :class:`LoadFailed`, :class:`LoadProgress`, :class:`ViewReady` and :class:`ViewFailed`
from their threads (``post_message`` is thread-safe); the screen posts :class:`Exported` to the app; the open
box's worker posts :class:`OpenProgress`, :class:`OpenFailed` and :class:`OpenSucceeded`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from saferl_tui.model import CubeModel
from saferl_tui.selection import CubeInfo, UISelection


@dataclass
class SelectionChanged(Message):
    """The selection panel changed the selection (labels, setting, iterates or baseline)."""

    selection: UISelection


@dataclass
class ViewParamsChanged(Message):
    """A view changed one of its own parameters (window, condition, x-range) and needs new data."""

    view_id: str


@dataclass
class LoadProgress(Message):
    """Progress of the first pass over the cube: fraction in [0, 1] and a short text."""

    fraction: float
    text: str


@dataclass
class CubeLoaded(Message):
    """The cube is open and its sufficient statistics are in memory."""

    info: CubeInfo


@dataclass
class LoadFailed(Message):
    """Opening the cube failed; ``error`` is one line for the user."""

    error: str


@dataclass
class ViewReady(Message):
    """Derived data for a view is ready; ``token`` identifies the request it answers."""

    view_id: str
    token: tuple
    data: Any
    incomplete: dict | None = None
    """Incomplete runs per (algo, task, bound) of the request's selection (``CubeModel.incomplete``)."""


@dataclass
class FooterReady(Message):
    """A view's footer line, computed after its data (`ResultView.fetch_footer`), or why it is not there."""

    view_id: str
    token: tuple
    text: str
    error: bool = False


@dataclass
class ConditionChosen(Message):
    """Enter on a Conditions row: show this (task, bound) condition's curves and histograms."""

    task: str
    bound: float


@dataclass
class ViewFailed(Message):
    """Computing a view's data failed with a user-facing one-line ``error``."""

    view_id: str
    token: tuple
    error: str


@dataclass
class Exported(Message):
    """The screen wrote files (``e``: the view's tables, ``s``: a screenshot); ``paths`` lists them."""

    paths: tuple[str, ...]


@dataclass
class OpenProgress(Message):
    """Progress of opening another cube from the open box (the current cube stays until it succeeds)."""

    text: str


@dataclass
class OpenFailed(Message):
    """Opening another cube failed; the current cube and selection stay."""

    error: str


@dataclass
class OpenSucceeded(Message):
    """Another cube is open and loaded; the screen switches to it."""

    model: CubeModel


@dataclass
class ViewShown(Message):
    """A view shows the data of its latest request (it bubbles to the app: e.g. to exit after the first
    Summary when `SAFERL_TUI_EXIT_AFTER_LOAD` is set)."""

    view_id: str


@dataclass
class FollowDone(Message):
    """One poll of follow mode finished (`saferl_tui.follow.Follower.step`): None when nothing was written."""

    update: Any
