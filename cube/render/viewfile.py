"""A saved view, ``*.saferl-view.toml``: what the TUI shows (the view, setting, selection and options) and
the fingerprint of the cube it was saved from. Read with `read_view` / `parse_view`, written with
`view_text` / `write_view`; `ViewFile.against` fits a view to a cube's labels. No textual: the TUI
(save, open, ``--view``) and ``saferl render`` share this model. The format is documented in docs/views.md.

A view file, written by hand::

    view = "cdf"
    setting = "final_greedy"

    [selection]
    algos = ["ppo_lag", "focops"]
    tasks = ["goal"]

    [options]
    boot = 2000
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from cube.errors import CubeError
from cube.stats.metrics import SETTINGS

SUFFIX = ".saferl-view.toml"
VERSION = 1
VIEW_KINDS = ("summary", "conditions", "cdf", "curves", "histograms", "runs", "learning", "runstatus", "profile",
              "front")
"""The views a file may name (the TUI's view ids; ``runstatus`` is its Status view, ``status`` is read as it)."""
VIEW_ALIASES = {"status": "runstatus"}
SELECTION_KEYS = ("algos", "tasks", "bounds", "seeds", "iterates")
OPTION_KEYS = ("boot", "ci", "rng_seed", "baseline", "not_safe", "reference", "window", "curve_var", "x_axis",
               "panel", "sort", "filter", "all_settings", "kappa_range", "cost", "condition", "bins")
FRONT_COSTS = ("Dnorm", "CVaR")
X_AXES = ("iterate", "env_steps")

Iterates = None | int | tuple[int, int]


@dataclass(frozen=True)
class ViewFile:
    """One saved view. Label tuples are None for "all the cube has"; options are None for the view's
    default. ``condition`` is the (task, bound) a per-condition view (curves, histograms) shows."""

    view: str
    setting: str = "train"
    algos: tuple[str, ...] | None = None
    tasks: tuple[str, ...] | None = None
    bounds: tuple[float, ...] | None = None
    seeds: tuple[int, ...] | None = None
    iterates: Iterates = None
    boot: int = 2000
    ci: float = 0.95
    rng_seed: int = 0
    baseline: str | None = None
    """The algorithm the Δ columns compare against (None: no baseline)."""
    not_safe: tuple[str, ...] | None = None
    """Algorithms that are not safe RL, never "best" (None: the cube's unconstrained ones)."""
    reference: str | None = None
    window: int | None = None
    curve_var: str | None = None
    x_axis: str | None = None
    """curves: the x axis, iterate or env_steps (x)."""
    panel: str | None = None
    """curves, histograms, learning, profile: the plot shown alone (p), by its name (None: all that fit)."""
    sort: str | None = None
    """conditions, runs, runstatus: the column the table is sorted by; a leading - reverses (> <, r)."""
    filter: str | None = None
    """conditions, runs, runstatus: the table's filter (/), e.g. "status:partial algo:ppo"."""
    all_settings: bool | None = None
    kappa_range: tuple[float, float] | None = None
    cost: str | None = None
    condition: tuple[str, float] | None = None
    bins: int | None = None
    cube: str | None = None
    """The path of the cube it was saved from (informative; ``saferl render --cube`` overrides it)."""
    fingerprint: str | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if self.view not in VIEW_KINDS:
            raise CubeError(f"view {self.view!r} is unknown: use one of {', '.join(VIEW_KINDS)}")
        if self.setting not in SETTINGS:
            raise CubeError(f"setting {self.setting!r} is unknown: use one of {', '.join(SETTINGS)}")
        if self.boot < 1:
            raise CubeError(f"boot must be a positive number of bootstrap replicates, not {self.boot}")
        if not 0 < self.ci < 1:
            raise CubeError(f"ci must lie strictly between 0 and 1 (e.g. 0.95), not {self.ci}")
        if self.window is not None and self.window < 1:
            raise CubeError(f"window must be a positive number of iterates, not {self.window}")
        if self.x_axis is not None and self.x_axis not in X_AXES:
            raise CubeError(f"x_axis {self.x_axis!r} is unknown: use one of {', '.join(X_AXES)}")
        if self.bins is not None and self.bins < 1:
            raise CubeError(f"bins must be a positive number of histogram bins, not {self.bins}")
        if self.kappa_range is not None and not self.kappa_range[0] < self.kappa_range[1]:
            raise CubeError(f"kappa_range must be [lo, hi] with lo < hi, not {list(self.kappa_range)}")
        if self.cost is not None and self.cost not in FRONT_COSTS:
            raise CubeError(f"cost {self.cost!r} is unknown: use one of {', '.join(FRONT_COSTS)}")

    def against(self, algos: tuple[str, ...], tasks: tuple[str, ...], bounds: tuple[float, ...],
                seeds: tuple[int, ...]) -> tuple[ViewFile, str | None]:
        """This view with every label list cut to those the cube has (None -> all of them), and one line
        naming the labels the cube lacks (None when it has them all). CubeError when nothing of a list is
        left (nothing to show)."""
        have = {"algos": algos, "tasks": tasks, "bounds": bounds, "seeds": seeds}
        missing, kept = [], {}
        for name, labels in have.items():
            wanted = getattr(self, name)
            if wanted is None:
                kept[name] = tuple(labels)
                continue
            present = [w for w in wanted if _has(labels, w)]
            lost = [w for w in wanted if not _has(labels, w)]
            if lost:
                missing.append(f"{name} {', '.join(_label(v) for v in lost)}")
            if not present:
                raise CubeError(f"the cube has none of the view's {name} ({', '.join(_label(v) for v in wanted)}): "
                                f"it has {', '.join(_label(v) for v in labels)}")
            kept[name] = tuple(_match(labels, w) for w in present)
        line = None
        if missing:
            line = f"the cube lacks {'; '.join(missing)}: the view shows the labels it has"
        extra: dict[str, Any] = {}
        if self.baseline is not None and self.baseline not in algos:
            extra["baseline"] = None
        return replace(self, **kept, **extra), line

    def selection_dict(self) -> dict[str, Any]:
        """The selection as plain values (lists; iterates as None, j or [lo, hi])."""
        values = {k: getattr(self, k) for k in SELECTION_KEYS}
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in values.items() if v is not None}


# ------------------------------------------------------------------------------------------------ reading
def read_view(path: str | os.PathLike) -> ViewFile:
    """The view saved at ``path``; CubeError (one line naming the file) when it cannot be read or is not a
    valid view file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CubeError(f"view file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CubeError(f"cannot read view file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return parse_view(text)
    except CubeError as exc:
        raise CubeError(f"{path}: {exc}") from None


def parse_view(text: str) -> ViewFile:
    """A `ViewFile` from its TOML text; CubeError (one line) for bad TOML, an unknown key or a bad value."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CubeError(f"not valid TOML ({exc}): see docs/views.md for the format") from None
    top = {"view", "setting", "cube", "fingerprint", "version", "selection", "options", "notes"}
    _no_unknown(doc, top, "top level")
    if "view" not in doc:
        raise CubeError(f"no 'view = ...' line: name one of {', '.join(VIEW_KINDS)}")
    version = doc.get("version", VERSION)
    if version != VERSION:
        raise CubeError(f"version {version!r} is not supported: this saferl reads version {VERSION}")
    sel = _table(doc, "selection")
    opt = _table(doc, "options")
    _no_unknown(sel, set(SELECTION_KEYS), "[selection]")
    _no_unknown(opt, set(OPTION_KEYS), "[options]")
    kw: dict[str, Any] = {
        "view": VIEW_ALIASES.get(_str(doc, "view"), _str(doc, "view")), "setting": _str(doc, "setting", "train"),
        "cube": _str(doc, "cube", None), "fingerprint": _str(doc, "fingerprint", None),
        "notes": tuple(_list(doc, "notes", str) or ()),
        "algos": _list(sel, "algos", str), "tasks": _list(sel, "tasks", str),
        "bounds": _list(sel, "bounds", float), "seeds": _list(sel, "seeds", int),
        "iterates": _iterates(sel.get("iterates", "all")),
        "boot": _num(opt, "boot", int, 2000), "ci": _num(opt, "ci", float, 0.95),
        "rng_seed": _num(opt, "rng_seed", int, 0),
        "baseline": _str(opt, "baseline", None) or None, "not_safe": _list(opt, "not_safe", str),
        "reference": _str(opt, "reference", None) or None, "window": _num(opt, "window", int, None),
        "curve_var": _str(opt, "curve_var", None), "x_axis": _str(opt, "x_axis", None),
        "panel": _str(opt, "panel", None) or None,
        "sort": _str(opt, "sort", None) or None, "filter": _str(opt, "filter", None) or None,
        "all_settings": _bool(opt, "all_settings"),
        "cost": _str(opt, "cost", None), "bins": _num(opt, "bins", int, None),
    }
    kr = _list(opt, "kappa_range", float)
    if kr is not None and len(kr) != 2:
        raise CubeError("kappa_range must be two numbers [lo, hi]")
    kw["kappa_range"] = None if kr is None else (kr[0], kr[1])
    cond = opt.get("condition")
    if cond is not None:
        if not (isinstance(cond, list) and len(cond) == 2 and isinstance(cond[0], str)
                and isinstance(cond[1], int | float) and not isinstance(cond[1], bool)):
            raise CubeError('condition must be [task, bound], e.g. ["goal", 25.0]')
        kw["condition"] = (cond[0], float(cond[1]))
    return ViewFile(**kw)


def _table(doc: dict, name: str) -> dict:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        raise CubeError(f"'{name}' must be a table ([{name}])")
    return value


def _no_unknown(doc: dict, known: set[str], where: str) -> None:
    unknown = sorted(set(doc) - known)
    if unknown:
        raise CubeError(f"unknown key {unknown[0]!r} at {where}: known keys are {', '.join(sorted(known))}")


def _str(doc: dict, key: str, default: Any = ...) -> Any:
    if key not in doc:
        if default is ...:
            raise CubeError(f"{key} is missing")
        return default
    if not isinstance(doc[key], str):
        raise CubeError(f"{key} must be a string, not {doc[key]!r}")
    return doc[key]


def _bool(doc: dict, key: str) -> bool | None:
    if key in doc and not isinstance(doc[key], bool):
        raise CubeError(f"{key} must be true or false, not {doc[key]!r}")
    return doc.get(key)


def _num(doc: dict, key: str, kind: type, default: Any) -> Any:
    if key not in doc:
        return default
    v = doc[key]
    ok = isinstance(v, int) if kind is int else isinstance(v, int | float)
    if isinstance(v, bool) or not ok or (kind is float and not math.isfinite(v)):
        raise CubeError(f"{key} must be {'an integer' if kind is int else 'a number'}, not {v!r}")
    return kind(v)


def _list(doc: dict, key: str, kind: type) -> tuple | None:
    if key not in doc:
        return None
    v = doc[key]
    if not isinstance(v, list):
        raise CubeError(f"{key} must be a list, e.g. {key} = [...], not {v!r}")
    out = []
    for x in v:
        ok = isinstance(x, str) if kind is str else (isinstance(x, int | float) and not isinstance(x, bool)
                                                     and (kind is float or isinstance(x, int)))
        if not ok:
            raise CubeError(f"{key} holds {x!r}: every entry must be {'a string' if kind is str else 'a number'}")
        out.append(kind(x))
    return tuple(out)


def _iterates(v: Any) -> Iterates:
    if v == "all":
        return None
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v) \
            and 0 <= v[0] <= v[1]:
        return (v[0], v[1])
    raise CubeError(f'iterates must be "all", an iterate j or [lo, hi] with 0 <= lo <= hi, not {v!r}')


def _has(labels: tuple, wanted: Any) -> bool:
    return any(_same(x, wanted) for x in labels)


def _match(labels: tuple, wanted: Any) -> Any:
    return next(x for x in labels if _same(x, wanted))


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        return math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12)
    return x == y


def _label(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


# ------------------------------------------------------------------------------------------------ writing
def view_text(view: ViewFile) -> str:
    """The TOML text of ``view`` (`parse_view` reads it back to an equal view)."""
    lines = ["# saferl view: saferl-tui CUBE --view THIS, or saferl render THIS --out FILE (docs/views.md)",
             f"version = {VERSION}", f"view = {_toml(view.view)}", f"setting = {_toml(view.setting)}"]
    for key in ("cube", "fingerprint"):
        if getattr(view, key) is not None:
            lines.append(f"{key} = {_toml(getattr(view, key))}")
    if view.notes:
        lines.append(f"notes = {_toml(list(view.notes))}")
    lines += ["", "[selection]"]
    for key in ("algos", "tasks", "bounds", "seeds"):
        if getattr(view, key) is not None:
            lines.append(f"{key} = {_toml(list(getattr(view, key)))}")
    it = view.iterates
    lines.append(f"iterates = {_toml('all' if it is None else (list(it) if isinstance(it, tuple) else it))}")
    lines += ["", "[options]"]
    names = {f.name for f in fields(ViewFile)}
    for key in OPTION_KEYS:
        assert key in names
        value = getattr(view, key)
        if value is None and key in ("baseline", "reference"):
            value = ""  # written, so a reader sees the option exists ("": none)
        if value is None:
            continue
        lines.append(f"{key} = {_toml(list(value) if isinstance(value, tuple) else value)}")
    return "\n".join(lines) + "\n"


def write_view(view: ViewFile, path: str | os.PathLike, *, replace_existing: bool = False) -> Path:
    """Write ``view`` to ``path`` (atomic; never over an existing file unless ``replace_existing``)."""
    from cube.outputs import write_text

    return write_text(Path(path), view_text(view), replace=replace_existing)


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "inf" if v > 0 else ("-inf" if v < 0 else "nan")
        return repr(v)
    if isinstance(v, str):
        out = v.replace("\\", "\\\\").replace('"', '\\"')
        out = "".join(c if c >= " " and c != "\x7f" else f"\\u{ord(c):04x}" for c in out)
        return f'"{out}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")
