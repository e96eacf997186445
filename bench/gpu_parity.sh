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

# shellcheck source=bench/gpu_env.sh
source bench/gpu_env.sh
gpu_env_install "$PY" "$SITE" "$LOG" || exit 2
gpu_env_check "$PY" "$LOG" jax jaxlib flax optax numpy xarray pandas zarr mujoco mujoco.mjx jaxopt ml_collections crax crax.envs crax.training.agents.ppo_lag.train crax.training.agents.focops.train cube train.onpolicy.core train.runner || exit 3

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
