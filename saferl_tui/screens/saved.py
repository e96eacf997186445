"""Saved views of the main screen: ``S`` (and the palette) saves the view on screen as a
``*.saferl-view.toml`` file (`cube.render.viewfile`), the palette lists and opens saved views, and
``saferl-tui CUBE --view FILE`` / ``--open VIEW --algos ...`` open one when the cube is loaded."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from cube.errors import CubeError
from cube.render.viewfile import SUFFIX, ViewFile, read_view, write_view
from cube.store.fingerprint import cube_fingerprint
from saferl_tui.messages import Exported
from saferl_tui.selection import UISelection

VIEW_KIND = {"status": "runstatus"}
"""The view file's name of a TUI view id where they differ (the Status view is ``runstatus``)."""


def view_file_of(sel: UISelection, view_id: str, options: dict, *, boot: int, rng_seed: int, cube: str,
                 fingerprint: str | None) -> ViewFile:
    """The `ViewFile` of a TUI view showing ``sel`` with its own ``options`` (`ResultView.view_options`)."""
    kappa = options.get("kappa_range")
    if kappa is not None and not math.isfinite(kappa[0]):  # the full range: -inf..inf
        kappa = (-math.inf, math.inf)
    return ViewFile(view=VIEW_KIND.get(view_id, view_id), setting=sel.setting, algos=sel.algos, tasks=sel.tasks,
                    bounds=sel.bounds, seeds=sel.seeds, iterates=sel.iterates, boot=boot, rng_seed=rng_seed,
                    baseline=sel.baseline, not_safe=sel.not_safe, reference=sel.reference,
                    **{**options, "kappa_range": kappa} if "kappa_range" in options else options,
                    cube=cube, fingerprint=fingerprint)


def selection_of(view: ViewFile, default: UISelection) -> UISelection:
    """The TUI selection of a view fitted to the cube (`ViewFile.against`); labels it leaves None are the
    cube's (``default``)."""
    return replace(default, algos=view.algos or default.algos, tasks=view.tasks or default.tasks,
                   bounds=view.bounds or default.bounds, seeds=view.seeds or default.seeds, setting=view.setting,
                   iterates=view.iterates, baseline=view.baseline,
                   not_safe=default.not_safe if view.not_safe is None else view.not_safe, reference=view.reference)


def free_view_name(out_dir: Path, stem: str) -> Path:
    """``<stem>.saferl-view.toml`` in ``out_dir``, with a counter (-2, -3, ...) when the name is taken."""
    k = 1
    while True:
        path = out_dir / f"{stem}{'' if k == 1 else f'-{k}'}{SUFFIX}"
        if not os.path.lexists(path):
            return path
        k += 1


class SavedViews:
    """Mixin of `MainScreen`: save the view on screen, list and open saved views. The screen provides the
    model, the selection, the views, `set_selection`, `action_show_view`, `notify_text` and `output_dir`."""

    model: Any
    selection: UISelection | None
    pending_view: ViewFile | None = None
    """A view to open once the cube is loaded (``--view``, ``--open``)."""
    view_notes: list[str]
    """The line about the last opened view's missing labels ([] when it had them all)."""

    def current_view_file(self) -> ViewFile | None:
        """The view on screen as a `ViewFile` (None before the cube is loaded)."""
        view = self.active_view()  # type: ignore[attr-defined]
        sel = view.selection or self.selection
        if sel is None or self.model.info is None:
            return None
        return view_file_of(sel, view.VIEW_ID, view.view_options(), boot=self.model.boot,
                            rng_seed=self.model.rng_seed, cube=str(self.model.path),
                            fingerprint=self.current_fingerprint())

    def current_fingerprint(self) -> str | None:
        """The fingerprint of the cube as opened (`cube.store.fingerprint`; None when it cannot be read)."""
        try:
            return cube_fingerprint(self.model.ds, self.model.path) if self.model.ds is not None else None
        except (CubeError, OSError):
            return None

    def action_save_view(self) -> None:
        """Save the view on screen as ``<view>_<tag>.saferl-view.toml`` in the export directory (never
        overwriting); `saferl-tui CUBE --view FILE` and `saferl render FILE` replay it."""
        vf = self.current_view_file()
        if vf is None:
            self.notify_text("Nothing to save yet: wait for the cube to load.", severity="warning",  # type: ignore[attr-defined]
                             title="Save view")
            return
        out_dir = self.output_dir  # type: ignore[attr-defined]
        sel = self.active_view().selection or self.selection  # type: ignore[attr-defined]
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            path = free_view_name(out_dir, f"{vf.view}_{sel.tag(self.model.info)}")
            write_view(vf, path)
        except (CubeError, OSError) as exc:
            self.notify_text(f"cannot save the view: {exc}", severity="error", title="Save view")  # type: ignore[attr-defined]
            return
        self.post_message(Exported((str(path),)))  # type: ignore[attr-defined]
        self.notify_text(f"{path}\nreplay: saferl-tui CUBE --view FILE; saferl render FILE --out OUT",  # type: ignore[attr-defined]
                         title="View saved", timeout=8)

    def saved_views(self) -> list[Path]:
        """Saved views next to the exports and in ./views/, newest first."""
        found: dict[Path, float] = {}
        for folder in (self.output_dir, Path("views")):  # type: ignore[attr-defined]
            if folder.is_dir():
                for p in folder.glob(f"*{SUFFIX}"):
                    try:
                        found[p] = p.stat().st_mtime
                    except OSError:
                        continue
        return sorted(found, key=lambda p: (-found[p], str(p)))

    def open_view_file(self, path: str | Path) -> None:
        """Open a saved view (a bad file: one line, the screen as it was)."""
        try:
            vf = read_view(path)
        except CubeError as exc:
            self.notify_text(str(exc), severity="error", title="Open view")  # type: ignore[attr-defined]
            return
        self.apply_view_file(vf)

    def apply_view_file(self, vf: ViewFile) -> None:
        """Show a view: its selection fitted to the cube (one line naming missing labels), its options,
        then the view itself. Before the cube is loaded it waits (`pending_view`)."""
        info = self.model.info
        if info is None or self.selection is None:
            self.pending_view = vf
            return
        self.pending_view = None
        try:
            fitted, missing = vf.against(info.algos, info.tasks, info.bounds, info.seeds)
            sel = selection_of(fitted, info.default_selection())
            if sel.iterates is not None:
                sel.cube_selection().check_iterates(info.n_iterates)
        except CubeError as exc:
            self.notify_text(f"cannot open the view: {exc}", severity="error", title="Open view")  # type: ignore[attr-defined]
            return
        notes = [missing] if missing else []
        now = self.current_fingerprint()
        if vf.fingerprint is not None and now is not None and vf.fingerprint != now:
            notes.append(f"the cube changed since the view was saved (fingerprint {vf.fingerprint}, now {now})")
        for line in notes:
            self.notify_text(line, severity="warning", title="Open view", timeout=8)  # type: ignore[attr-defined]
        self.view_notes = notes
        view = self.view({v: k for k, v in VIEW_KIND.items()}.get(vf.view, vf.view))  # type: ignore[attr-defined]
        view.selection = sel
        view.apply_view_options({k: getattr(fitted, k) for k in view.view_options()})
        self.action_show_view(view.VIEW_ID)  # type: ignore[attr-defined]
        self.set_selection(sel)  # type: ignore[attr-defined]
