#!/usr/bin/env bash
# GPU learning parity + throughput, this project's trainer vs crax-bench's own, run from the repo root:
#     bash bench/gpu_parity.sh
# One short prepared run (about 8 minutes in all): installs the wheels in .whl/ (crax-bench, mujoco,
# mujoco-mjx, jaxopt, ml-collections, trimesh, glfw, pyopengl, zarr, numcodecs, donfig, google-crc32c,
# dask, partd, locket) into /tmp/site without touching the system's packages, checks the imports, then
# runs bench/learning_parity.py at the paper's sizes (2048 envs, T 2000, batch 1024 x 32, 6 epochs,
# 100 paired eval episodes) on safe_circle_point for PPO-Lag and FOCOPS, seeds 0 and 1, under `timeout`.
# Each (algorithm, seed) prints a line as soon as it is done, each algorithm its table, so a run stopped at
# LIMIT still leaves what finished.
#
# Knobs (environment): ALGOS (default ppo_lag,focops), SEEDS (0,1), ITERATES (3; the first holds the
# compile), TASK (circle), BOUND (25), LIMIT (seconds for the benchmark, default 440), OUT (where
# gpu_parity.log goes, default /tmp/out), PYTHON (python3), TINY=1 (tiny sizes instead of --paper, to
# check this script on a CPU), SKIP_INSTALL=1 (use $PYTHON's packages as they are).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
LOG="$OUT/gpu_parity.log"
SITE=/tmp/site
t_start=$SECONDS
: > "$LOG"

if [ "${SKIP_INSTALL:-0}" != 1 ]; then
  {
    echo "== install .whl -> $SITE"
    if "$PY" -m pip --version >/dev/null 2>&1; then
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        || { echo "pip install failed"; exit 2; }
    else  # no pip: a wheel is a zip; none of these has a .data directory, so unpacking is the install
      echo "(no pip: unpacking the wheels)"
      "$PY" - "$SITE" .whl/*.whl <<'EOF' || { echo "unpacking failed"; exit 2; }
import sys, zipfile
for w in sys.argv[2:]:
    zipfile.ZipFile(w).extractall(sys.argv[1])
EOF
    fi
    ls .whl
  } 2>&1 | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" -eq 0 ] || exit 2
  export PYTHONPATH="$SITE:$PWD"
else
  export PYTHONPATH="$PWD"
fi
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.9
export PYTHONUNBUFFERED=1

{
  echo "== $(date -u +%FT%TZ) install took $((SECONDS - t_start)) s"
  nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
  "$PY" - <<'EOF'
import contextlib, importlib, io, sys
print("python", sys.version.split()[0])
bad = []
for m in ("jax", "jaxlib", "flax", "optax", "numpy", "xarray", "pandas", "zarr", "mujoco", "mujoco.mjx", "jaxopt",
          "ml_collections", "crax", "crax.envs", "crax.training.agents.ppo_lag.train",
          "crax.training.agents.focops.train", "cube", "train.core", "train.runner"):
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            mod = importlib.import_module(m)
        print(f"  {m:<36} {getattr(mod, '__version__', '')}")
    except Exception as exc:
        bad.append(m)
        print(f"  {m:<36} IMPORT FAILED: {type(exc).__name__}: {exc}")
if "jax" not in bad:
    import jax
    print("jax devices:", jax.devices(), "backend:", jax.default_backend())
sys.exit(1 if bad else 0)
EOF
} 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "import check failed (see above)" | tee -a "$LOG"; exit 3; }

SIZE=--paper
[ "${TINY:-0}" = 1 ] && SIZE=--tiny
echo "== $(date -u +%FT%TZ) learning parity $SIZE (limit ${LIMIT:-440} s)" | tee -a "$LOG"
timeout -k 15 "${LIMIT:-440}" "$PY" bench/learning_parity.py "$SIZE" --task "${TASK:-circle}" \
  --algos "${ALGOS:-ppo_lag,focops}" --seeds "${SEEDS:-0,1}" --iterates "${ITERATES:-3}" --bound "${BOUND:-25}" \
  --every 1 2>&1 | grep --line-buffered -v -e "Failed to import warp" -e "not actively being maintained" \
  -e "warnings.warn(" | tee -a "$LOG"
rc=${PIPESTATUS[0]}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>/dev/null | tee -a "$LOG"
echo "== $(date -u +%FT%TZ) learning parity rc=$rc (124: stopped at LIMIT), total $((SECONDS - t_start)) s" | tee -a "$LOG"
exit "$rc"
