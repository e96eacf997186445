#!/usr/bin/env bash
# GPU throughput check on a machine without internet, run from the repo root (bash bench/gpu_check.sh).
#
# Needs: python3 with jax[cuda] + flax/optax/orbax/numpy/scipy/xarray/pandas/... already installed, and
# the wheels of the rest in .whl/ (crax-bench, mujoco, mujoco-mjx, jaxopt, ml-collections, trimesh,
# glfw, pyopengl, zarr, numcodecs, donfig, google-crc32c, dask, partd, locket), installed here into
# /tmp/site without touching the system's packages.
#
# Knobs (environment): RUNS (group sizes, default 1,8,32,90), TASK (default goal), ITERATES (default 2),
# T (episode length, default 100), LIMIT (seconds for the benchmark before it is stopped, default 560),
# OUT (where gpu_throughput.log goes, default /tmp/out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG="$OUT/gpu_throughput.log"
SITE=/tmp/site
t_start=$SECONDS

{
  echo "== install .whl -> $SITE"
  if python3 -m pip --version >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
      || { echo "pip install failed"; exit 2; }
  else  # no pip: a wheel is a zip; none of these has a .data directory, so unpacking is the install
    echo "(no pip: unpacking the wheels)"
    python3 - "$SITE" .whl/*.whl <<'EOF' || { echo "unpacking failed"; exit 2; }
import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])
EOF
  fi
  ls .whl
} 2>&1 | tee "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 2

export PYTHONPATH="$SITE:$PWD"
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.9
export PYTHONUNBUFFERED=1

{
  echo "== $(date -u +%FT%TZ) install took $((SECONDS - t_start)) s"
  nvidia-smi -L || echo "(no nvidia-smi)"
  python3 - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0])
bad = []
for m in ("jax", "jaxlib", "flax", "optax", "orbax.checkpoint", "numpy", "scipy", "xarray", "pandas", "zarr",
          "dask", "mujoco", "mujoco.mjx", "jaxopt", "ml_collections", "crax", "crax.envs", "cube", "train.core",
          "train.runner", "train.sweep"):
    try:
        mod = importlib.import_module(m)
        v = getattr(mod, "__version__", "")
        print(f"  {m:<18} {v}  {getattr(mod, '__file__', '')}")
    except Exception as exc:
        bad.append(m)
        print(f"  {m:<18} IMPORT FAILED: {type(exc).__name__}: {exc}")
if "jax" not in bad:
    import jax
    print("jax devices:", jax.devices(), "backend:", jax.default_backend())
sys.exit(1 if bad else 0)
EOF
} 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "import check failed (see above)" | tee -a "$LOG"; exit 3; }

echo "== $(date -u +%FT%TZ) benchmark (limit ${LIMIT:-560} s)" | tee -a "$LOG"
timeout -k 15 "${LIMIT:-560}" python3 bench/sweep_throughput.py --paper --episode-length "${T:-100}" \
  --runs "${RUNS:-1,8,32,90}" --iterates "${ITERATES:-2}" --task "${TASK:-goal}" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>/dev/null | tee -a "$LOG"
echo "== $(date -u +%FT%TZ) benchmark rc=$rc (124: stopped at LIMIT), total $((SECONDS - t_start)) s" | tee -a "$LOG"
exit "$rc"
