"""The statistics loop compiled ahead of time: an extension module in saferl's cache folder that a process
loads in milliseconds, where numba's JIT costs a cold process about a second before its first block (numba's
import, 0.3 s, and the load of its cached compile, 0.8 s, both holding the GIL while the other decode thread
of a full pass waits for it).

One module per build key (`key`): the loop's source, this build's format, numba's version, the Python, the
machine and the host CPU's name and features (a module compiled for one CPU is never loaded on another, as
with a home folder shared by a cluster's nodes), remembered per machine under cheaper facts (`quick_facts`) so
that finding the module imports no llvmlite. `load` finds the module of this key, or None; the first
process without one has a detached, nice'd child build it (`build_in_background`: 12-14 s of one core, by
numba's pycc), so no command waits for it; until it exists, and for dtypes other than float32 and float64,
`cube.stats.fused` compiles the loop with numba's JIT, as before. The build needs setuptools and a C compiler
(pycc's toolchain); a build that fails leaves a ``.failed`` note with its reason and is not tried again for
that key.

The functions are the same source (`cube.stats.fused_loop.cells`) compiled with the JIT's options: the GIL
released while they run, numpy's error model, no fast-math; bit for bit the JIT's numbers
(tests/test_fused_kernel.py runs its tests on both).

    python -m cube.stats.prebuilt     # build it now, in the foreground (a job script, an image)

$SAFERL_PREBUILT=off neither loads nor builds one (the test suite's default: it tests the module on purpose).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cube.store.location import cache_home

FORMAT = 1
"""This build's format: raised when what a module holds, or how it is compiled, changes."""

ARGUMENTS = ("{f}[:,:,::1]", "{f}[:,:,::1]", "b1[::1]", "f8", "{f}", "{f}[::1]", "{f}", "{f}", "i4[::1]", "{f}[::1]",
             "b1", "f8[:,::1]", "i8[:,::1]", "b1[::1]", "i8[::1]", "i8[:,::1]", "f8[:,::1]", "f8[:,::1]")
"""`fused_loop.cells`'s arguments as `cube.stats.fused.fill_cells` passes them, {f} the episodes' dtype."""

SIGNATURE = "b1(" + ", ".join(ARGUMENTS) + ")"

DTYPES = {np.dtype(np.float32): "f4", np.dtype(np.float64): "f8"}
"""The episode dtypes a module holds a function for (`cells_f4`, `cells_f8`)."""

_CODES = {"f4": np.float32, "f8": np.float64, "i4": np.int32, "i8": np.int64, "b1": np.bool_}


class Checked:
    """A module function that checks its array arguments first: an AOT function trusts the types it was
    compiled for (another dtype, rank or a strided array would be read as garbage), so a call whose arrays
    differ raises TypeError before anything runs, and the caller takes the JIT."""

    def __init__(self, function: Callable[..., bool], code: str) -> None:
        self._function = function
        self._arrays = tuple((i, np.dtype(_CODES[a.split("[")[0].format(f=code)]), a.count(",") + 1)
                             for i, a in enumerate(ARGUMENTS) if "[" in a)

    def __call__(self, *args: object) -> bool:
        if len(args) != len(ARGUMENTS) or not all(
                isinstance(x := args[i], np.ndarray) and x.dtype == dtype and x.ndim == ndim
                and x.flags.c_contiguous and x.flags.aligned for i, dtype, ndim in self._arrays):
            raise TypeError("arguments of other types than the prebuilt loop's")
        return self._function(*args)


STALE_BUILD_S = 600.0
"""A build lock older than this is left over from a killed build: the next process builds again."""

OFF_VALUES = ("off", "0", "no", "false")


def enabled() -> bool:
    """Whether prebuilt modules are loaded and built ($SAFERL_PREBUILT, default on)."""
    return os.environ.get("SAFERL_PREBUILT", "on").strip().lower() not in OFF_VALUES


def folder() -> Path:
    """Where the modules live: ``kernel/`` of saferl's cache folder (`cube.store.location.cache_home`)."""
    return cache_home() / "kernel"


@functools.cache
def key() -> str | None:
    """This process's build key (16 hex digits), or None where numba or llvmlite is missing: `full_key`,
    remembered in the modules' folder under `quick_facts`, so that a process finds its module without
    importing llvmlite (40-60 ms of a cold report)."""
    facts = quick_facts()
    memo = folder() / f"key-{facts}.txt" if facts is not None else None
    if memo is not None:
        try:
            known = memo.read_text().strip()
        except OSError:
            known = ""
        if len(known) == 16 and all(c in "0123456789abcdef" for c in known):
            return known
    computed = full_key()
    if memo is not None and computed is not None:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
            tmp.write_text(computed + "\n")
            os.replace(tmp, memo)
        except OSError:
            pass  # a read-only cache folder: computed each time
    return computed


CPUINFO = Path("/proc/cpuinfo")
CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
"""The fields of the first processor in CPUINFO that name what it is (not its clock or its place)."""


def quick_facts() -> str | None:
    """A digest (16 hex digits) of what `full_key` depends on, learnt cheaply: this build's format and
    signature, the Python, the machine, the loop's source, numba's and llvmlite's installs (the path, size
    and mtime of each `__init__.py`: an upgrade changes them) and the CPU as CPUINFO names it (CPU_FIELDS of
    its first processor: the CPUID that llvmlite reads too); None where CPUINFO is not readable (not Linux)
    or either package is missing."""
    try:
        first = CPUINFO.read_text().split("\n\n", 1)[0]
        installs = []
        for name in ("numba", "llvmlite"):
            spec = importlib.util.find_spec(name)
            st = os.stat(spec.origin)  # type: ignore[union-attr, arg-type]
            installs.append(f"{spec.origin}:{st.st_size}:{st.st_mtime_ns}")  # type: ignore[union-attr]
        loop_source = (Path(__file__).with_name("fused_loop.py")).read_bytes()
    except (OSError, ValueError, ImportError, AttributeError, TypeError):
        return None
    cpu = [line for line in first.splitlines() if line.split(":", 1)[0].strip() in CPU_FIELDS]
    digest = hashlib.blake2b(digest_size=8)
    for part in (str(FORMAT), SIGNATURE, sys.version, platform.machine(), *installs, *cpu):
        digest.update(part.encode() + b"\0")
    digest.update(loop_source)
    return digest.hexdigest()


@functools.cache
def full_key() -> str | None:
    """The build key computed (16 hex digits; llvmlite asked for the CPU), or None where numba or llvmlite is
    missing."""
    try:
        from importlib.metadata import version

        import llvmlite.binding as llvm

        numba_version = version("numba")
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    except Exception:  # noqa: BLE001 - no numba, or an llvmlite that cannot name the CPU: JIT only
        return None
    digest = hashlib.blake2b(digest_size=8)
    loop_source = (Path(__file__).with_name("fused_loop.py")).read_bytes()
    for part in (str(FORMAT), SIGNATURE, numba_version, sys.version, platform.machine(), cpu, features):
        digest.update(part.encode() + b"\0")
    digest.update(loop_source)
    return digest.hexdigest()


def module_name(build_key: str) -> str:
    return f"saferl_cells_{build_key}"


def module_path(build_key: str) -> Path:
    return folder() / (module_name(build_key) + importlib.machinery.EXTENSION_SUFFIXES[0])


def load() -> dict[np.dtype, Callable[..., bool]] | None:
    """{episode dtype: the compiled `cells`} of this key's module, or None (off, not built, unloadable)."""
    build_key = key() if enabled() else None
    if build_key is None:
        return None
    path = module_path(build_key)
    if not path.is_file():
        return None
    try:
        spec = importlib.util.spec_from_file_location(module_name(build_key), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return {dtype: Checked(getattr(module, f"cells_{code}"), code) for dtype, code in DTYPES.items()}
    except Exception:  # noqa: BLE001 - a damaged or foreign file: the JIT serves
        return None


def marker(build_key: str, kind: str) -> Path:
    """The note beside this key's module: ``building`` (the build lock) or ``failed`` (why it failed)."""
    return folder() / f"{module_name(build_key)}.{kind}"


def _building(build_key: str) -> bool:
    lock = marker(build_key, "building")
    try:
        return time.time() - lock.stat().st_mtime < STALE_BUILD_S
    except OSError:
        return False


def build_in_background() -> bool:
    """Start a detached, nice'd child that builds this key's module, unless one exists, is being built or
    failed before; returns whether a child was started. Its output goes nowhere: it never writes on the
    terminal of the command that started it, and outlives it."""
    build_key = key() if enabled() else None
    if build_key is None or module_path(build_key).exists() or marker(build_key, "failed").exists():
        return False
    if _building(build_key):
        return False
    try:
        subprocess.Popen([sys.executable, "-m", "cube.stats.prebuilt", "--background"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        return False
    return True


def build(build_key: str) -> Path:
    """Compile this key's module into `folder()` (atomically: a reader sees the whole file or none); returns
    its path. Raises what the compile raised. Runs in a process of its own: it adjusts numba's AOT compiler
    (GIL released, numpy's error model, the host's CPU features) for this process."""
    import warnings

    warnings.simplefilter("ignore")  # pycc's deprecation notice: this build pins the numba it was made with
    import llvmlite.binding as llvm
    import numba.pycc.compiler as pycc_compiler
    from numba.core.codegen import AOTCPUCodegen
    from numba.core.compiler import Flags
    from numba.pycc import CC

    from cube.stats import fused_loop

    class JitFlags(Flags):
        """The flags of `cube.stats.fused`'s njit: the GIL released while the loop runs, numpy's errors."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True
            self.error_model = "numpy"

    features = llvm.get_host_cpu_features().flatten()
    pycc_compiler.Flags = JitFlags
    AOTCPUCodegen._customize_tm_features = lambda self: features  # the JIT's features, not the model's
    target = folder()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target, prefix=".build-") as scratch:
        cc = CC(module_name(build_key))
        cc.output_dir = scratch
        cc.target_cpu = llvm.get_host_cpu_name()
        for code in DTYPES.values():
            cc.export(f"cells_{code}", SIGNATURE.format(f=code))(fused_loop.cells)
        cc.compile()
        built = Path(scratch) / cc.output_file
        os.replace(built, module_path(build_key))
    return module_path(build_key)


def main(argv: list[str] | None = None) -> int:
    """Build this key's module unless it exists or another process builds it; `--background`: nice'd."""
    argv = sys.argv[1:] if argv is None else argv
    build_key = key()
    if build_key is None:
        print("error: numba is not installed: there is no compiled loop to build", file=sys.stderr)
        return 2
    path = module_path(build_key)
    if path.exists():
        print(f"{path}: built already")
        return 0
    if "--background" in argv:
        os.nice(10)
    folder().mkdir(parents=True, exist_ok=True)
    lock = marker(build_key, "building")
    if _building(build_key):
        print(f"{lock}: another process is building it")
        return 0
    if lock.exists():
        lock.unlink(missing_ok=True)  # a stale lock, of a killed build (`_building` said so)
    try:
        handle = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return 0  # another process took it just now
    started = time.perf_counter()
    try:
        built = build(build_key)
    except Exception as exc:  # noqa: BLE001 - noted once, never retried for this key
        reason = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        marker(build_key, "failed").write_text(reason + "\n")
        print(f"error: the compiled loop could not be built ({reason}); numba's JIT serves instead",
              file=sys.stderr)
        return 1
    finally:
        os.close(handle)
        lock.unlink(missing_ok=True)
    print(f"{built}: built in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
