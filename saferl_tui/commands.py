"""Command palette provider: views, exports, settings, baselines, not-safe algorithms and selection shortcuts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

from cube.stats.metrics import SETTING, SETTINGS
from saferl_tui.views import VIEW_CLASSES

if TYPE_CHECKING:
    from saferl_tui.screens.main import MainScreen


class SaferlCommands(Provider):
    """Offers every view, export, setting, baseline and select-all/none as a palette command."""

    def _main(self) -> MainScreen | None:
        from saferl_tui.screens.main import MainScreen

        for screen in reversed(self.app.screen_stack):
            if isinstance(screen, MainScreen):
                return screen
        return None

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        main = self._main()
        if main is None:
            return []
        cmds: list[tuple[str, Callable[[], object], str]] = []
        for cls in VIEW_CLASSES:
            cmds.append((f"View: {cls.TITLE}", partial(main.action_show_view, cls.VIEW_ID), f"key {cls.KEY}"))
        cmds += [
            ("Export current view (CSV + LaTeX)", main.action_export, "key e"),
            ("Figure of current view (PDF next to the cube)", main.action_figure, "key P"),
            ("Save SVG screenshot", main.action_screenshot, "key s"),
            ("Toggle selection panel", main.action_toggle_selection, "key f"),
            ("Open another cube", main.action_open_path, "key o"),
            ("Help: key bindings", main.action_help, "key ?"),
            ("Filter the table (Conditions, Runs)", main.action_filter, "key /"),
            ("Save this view (view file)", main.action_save_view, "key S"),
        ]
        for path in main.saved_views():
            cmds.append((f"Open view: {path.name}", partial(main.open_view_file, path), str(path.parent)))
        sel, info = main.selection, main.model.info
        if sel is None or info is None:
            return cmds
        for s in SETTINGS:
            cmds.append((f"Setting: {SETTING[s].label}", partial(main.set_selection, replace(sel, setting=s)),
                         "key t cycles"))
        cmds.append(("Iterates: all", partial(main.set_selection, replace(sel, iterates=None)), "training iterates"))
        for a in (*info.algos, None):
            cmds.append((f"Baseline: {a or 'none'}", partial(main.set_selection, replace(sel, baseline=a)),
                         "key b cycles"))
        for a in info.algos:
            if a in sel.not_safe:
                safe = tuple(x for x in sel.not_safe if x != a)
                cmds.append((f"Mark {a} as safe RL (may be best)", partial(main.set_selection,
                                                                           replace(sel, not_safe=safe)), ""))
            else:
                unsafe = tuple(x for x in info.algos if x in sel.not_safe or x == a)
                cmds.append((f"Mark {a} as not safe RL (never best)", partial(main.set_selection,
                                                                              replace(sel, not_safe=unsafe)), ""))
        everything = replace(sel, algos=info.algos, tasks=info.tasks, bounds=info.bounds, seeds=info.seeds)
        cmds.append(("Select all (algorithms, tasks, bounds, seeds)", partial(main.set_selection, everything), ""))
        for a in info.algos:
            only = replace(sel, algos=(a,))
            cmds.append((f"Select only algorithm {a}", partial(main.set_selection, only), ""))
            if a in sel.algos:
                without = replace(sel, algos=tuple(x for x in sel.algos if x != a))
                cmds.append((f"Deselect algorithm {a}", partial(main.set_selection, without), ""))
        for t in info.tasks:
            cmds.append((f"Select only task {t}", partial(main.set_selection, replace(sel, tasks=(t,))), ""))
        for b in info.bounds:
            cmds.append((f"Select only bound d={b:g}", partial(main.set_selection, replace(sel, bounds=(b,))), ""))
        return cmds

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
