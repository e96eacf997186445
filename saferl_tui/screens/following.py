"""Follow mode of the main screen (`w`): a timer polls the store in a thread worker
(`saferl_tui.follow.Follower`); when runs were written, the statistics are updated and the views refresh,
keeping the selection, each table's cursor and scroll position, and focus."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from saferl_tui.follow import Follower, FollowUpdate
from saferl_tui.messages import FollowDone
from saferl_tui.views import ResultView
from saferl_tui.widgets import SelectionPanel


class FollowMode:
    """Mixin of `MainScreen`: follow mode. The screen provides the model, the views and `request`."""

    model: Any
    selection: Any
    follower: Follower | None
    following: bool
    follow_choice: bool | None
    follow_interval: float
    last_update: FollowUpdate | None
    _polling: bool
    follow_log: list[str]
    _shown: dict
    _pending: dict
    _refreshing: set[str]

    def _start_following(self) -> None:
        """Follow a zarr store: on when asked, or by default when some run is partial or pending."""
        if self.model.remote or not Path(self.model.path).is_dir() or self.model.seqs is None:
            return
        self.follower = Follower(self.model)
        self.following = (self.follow_choice if self.follow_choice is not None
                          else self.model.following_worthwhile)
        self.set_interval(self.follow_interval, self.poll_store)
        self._header()

    def _follow_text(self) -> str:
        """The header's follow note: 'following · updated 12:03:04 · 3 runs changed', or ''."""
        if not self.following:
            return ""
        upd = self.last_update
        if upd is None:
            return "● following (w stops)"
        when = time.strftime("%H:%M:%S", time.localtime(upd.at))
        return f"● updated {when} · {upd.changed} run{'s' if upd.changed != 1 else ''} changed"

    def poll_store(self) -> None:
        """One poll of the store in a thread worker, unless one is still running or follow mode is off."""
        if not self.following or self._polling or self.follower is None:
            return
        self._polling = True
        follower = self.follower
        self.run_worker(lambda: self.post_message(FollowDone(follower.step())), name="follow", group="follow",
                        thread=True)

    def on_follow_done(self, msg: FollowDone) -> None:
        self._polling = False
        upd: FollowUpdate | None = msg.update
        if upd is None:  # nothing written: only the Status view changes (time since last write, stalled)
            if self.active_view().VIEW_ID == "status":
                self._shown.pop("status", None)
                self._refreshing.add("status")
                self.request(self.active_view())
            return
        for note in upd.notes:
            self.follow_log.append(note)
            self.notify_text(note, severity="warning", title="Following", timeout=8)
        if upd.error is not None:
            self.follow_log.append(upd.error)
            self.notify_text(upd.error, severity="error", title="Following", timeout=8)
            return
        if upd.gone:
            self.following = False
            self._header()
            return
        self.last_update = upd
        if upd.grew:
            self._adopt_grown_grid()
        self.refresh_views()

    def _adopt_grown_grid(self) -> None:
        """After the grid grew: labels of a dimension that was wholly selected are selected with the new ones."""
        info, sel = self.model.info, self.selection
        if info is None or sel is None:
            return
        panel = self.query_one(SelectionPanel)
        old = panel.info
        if old is not None:
            sel = replace(sel, **{d: getattr(info, d) for d in ("algos", "tasks", "bounds", "seeds")
                                  if getattr(sel, d) == getattr(old, d)})
        self.selection = sel
        panel.populate(info, sel)

    def refresh_views(self) -> None:
        """The statistics changed: every view's data is stale; the active view asks again now (keeping its
        cursor, scroll position and focus), the others when shown."""
        self._shown.clear()
        self._pending.clear()
        self._refreshing = {v.VIEW_ID for v in self.query(ResultView) if v.data is not None}
        self._header()
        self.request(self.active_view())

    def action_toggle_follow(self) -> None:
        """Follow the store on/off."""
        if self.follower is None:
            self.notify_text("Nothing to follow: follow mode watches a zarr store with write sequences.",
                             title="Follow", timeout=4)
            return
        self.following = not self.following
        self._header()
        self.notify_text(f"Follow mode {'on' if self.following else 'off'}.", title="Follow", timeout=3)
        if self.following:
            self.poll_store()
