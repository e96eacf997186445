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

: > "$LOG"
# shellcheck source=bench/gpu_env.sh
source bench/gpu_env.sh
gpu_env_install python3 "$SITE" "$LOG" || exit 2
gpu_env_check python3 "$LOG" jax jaxlib flax optax orbax.checkpoint numpy scipy xarray pandas zarr dask mujoco mujoco.mjx jaxopt ml_collections crax crax.envs cube train.onpolicy.core train.runner train.sweep || exit 3

echo "== $(date -u +%FT%TZ) benchmark (limit ${LIMIT:-560} s)" | tee -a "$LOG"
timeout -k 15 "${LIMIT:-560}" python3 bench/sweep_throughput.py --paper --episode-length "${T:-100}" \
  --runs "${RUNS:-1,8,32,90}" --iterates "${ITERATES:-2}" --task "${TASK:-goal}" 2>&1 | tee -a "$LOG"
rc=${PIPESTATUS[0]}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>/dev/null | tee -a "$LOG"
echo "== $(date -u +%FT%TZ) benchmark rc=$rc (124: stopped at LIMIT), total $((SECONDS - t_start)) s" | tee -a "$LOG"
exit "$rc"
