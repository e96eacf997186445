"""xarray without dask imports it does not need (issue 37): a cached report builds xarray variables of numpy
arrays only, yet xarray imports dask.array (half a second, with scipy) the first time it builds one, and the dask
package (a fifth of a second, with jinja2 and yaml) the first time it asks whether an array is a dask
collection. Both questions have their answer without the import while nothing has imported dask: no object is
a `dask.array.Array` before dask.array exists, and a collection that is not dask's own is one by its
`__dask_graph__`. `defer_dask_imports` answers them so until dask is imported, and leaves xarray's own answers
from then on.
"""

from __future__ import annotations

import sys
from typing import Any


def defer_dask_imports() -> None:
    """Answer xarray's two dask questions without importing dask while nothing else has (module docstring).
    Idempotent; a no-op where xarray keeps these answers otherwise (another version) or dask is not installed."""
    from importlib.util import find_spec

    from xarray.namedarray import pycompat, utils

    if find_spec("dask") is None:
        return
    _defer_array_type(pycompat)
    asks = getattr(utils, "is_dask_collection", None)
    if callable(asks) and not getattr(asks, "defers_dask", False):
        utils.is_dask_collection = _without_import(asks)


def _without_import(asks: Any) -> Any:
    """xarray's `is_dask_collection` (`asks`), answered without importing dask until dask is imported whole: by
    the protocol dask's own test applies to collections not its own (a callable `__dask_graph__` giving a graph;
    no object of dask's exists before dask does). Never an import from here: a thread importing dask while
    another one does can deadlock Python's import locks, which then fail one of them."""

    def is_dask_collection(x: object) -> bool:
        dask = sys.modules.get("dask")
        if dask is not None and not getattr(getattr(dask, "__spec__", None), "_initializing", True):
            return asks(x)  # imported whole: dask's own answer
        graph = None if isinstance(x, type) else getattr(x, "__dask_graph__", None)
        return callable(graph) and graph() is not None

    is_dask_collection.defers_dask = True  # type: ignore[attr-defined]
    return is_dask_collection


def _defer_array_type(pycompat: Any) -> None:
    """xarray's record of dask (its duck-array modules) with the array type looked up when asked, never
    imported for it: `()` until dask.array is imported, then `(dask.array.Array,)`."""
    known, base = getattr(pycompat, "_cached_duck_array_modules", None), getattr(pycompat, "DuckArrayModule", None)
    if not isinstance(known, dict) or not isinstance(base, type) or "dask" in known:
        return

    class DaskWhenImported(base):  # type: ignore[misc, valid-type]
        """xarray's record of dask whose array type is looked up when asked."""

        def __init__(self) -> None:  # the base class imports the module here
            pass

        @property
        def type(self) -> tuple[type, ...]:
            array = getattr(sys.modules.get("dask.array"), "Array", None)
            return (array,) if isinstance(array, type) else ()

        @property
        def module(self) -> Any:
            import dask

            return dask

        @property
        def version(self) -> Any:
            from packaging.version import Version

            return Version(self.module.__version__)

        @property
        def available(self) -> bool:
            return True

    known["dask"] = DaskWhenImported()
