#!/usr/bin/env bash
# GPU suite, this project's trainer vs crax-bench's own on one GPU, run from the repo root:
#     bash bench/gpu_suite.sh
# Two parts, each line printed as soon as it is measured (a run stopped at LIMIT still leaves what finished):
#  1. throughput: for each algorithm (ALGOS, default all seven on-policy ones) one run of ours and one of crax's
#     on TASK (default circle) at the paper's sizes (2048 envs, T, batch 1024 x 32, 6 epochs): env steps/s of
#     both (compile excluded; ours writes every episode to a cube) and the ratio (bench/train_throughput.py).
#  2. grid: the paper's grid in device-hours, like for like on this GPU: for each task (GRID_TASKS, default the
#     four Point tasks) and algorithm (GRID_ALGOS, default the paper's four), ours as a vmapped group of GROUP
#     runs (the way `saferl train` runs a sweep) vs crax one run at a time, each measured at the paper's sizes
#     (steps/s do not depend on T, so GRID_T (default 100) keeps it short); then the hours of 90 runs (3 bounds x
#     30 seeds) x 5e8 steps per cell both ways, summed over the grid, with the ratio and the goal (<= 1/3).
# Expected duration on an H100/H200: about 2.5 min per algorithm in part 1 at T = 2000, about 4 min per cell in
# part 2 (two compiles each): ~17 + ~64 min with the defaults; narrow ALGOS / GRID_TASKS / GRID_ALGOS to fit.
#
# Knobs (environment): PART (throughput, grid or both; default both), ALGOS, TASK, T (2000), ITERATES (3; the
# first holds the compile), GRID_TASKS, GRID_ALGOS, GROUP (32), GRID_T (100), GRID_ITERATES (2), CRAX_LOG (on:
# crax's default log_training_metrics; off), LIMIT (seconds per part, default 3000), OUT (where gpu_suite.log
# goes, default /tmp/out), PYTHON (python3), SKIP_INSTALL=1 (use $PYTHON's packages as they are), TINY=1
# (tiny sizes on any device: 8 envs, T 32, batch 8 x 4, 2 epochs, 8-unit networks, GROUP 2; checks this script
# on a CPU, tests/test_train_gpu_suite.py runs it so). The compile cache is shared by the parts (CACHE, default
# $OUT/jaxcache), so crax's single-run compile of part 1 is reused in part 2.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
LOG="$OUT/gpu_suite.log"
SITE=/tmp/site
CACHE=${CACHE:-$OUT/jaxcache}
t_start=$SECONDS
: > "$LOG"

# shellcheck source=bench/gpu_env.sh
source bench/gpu_env.sh
gpu_env_install "$PY" "$SITE" "$LOG" || exit 2
gpu_env_check "$PY" "$LOG" jax flax optax zarr mujoco mujoco.mjx crax crax.envs $(printf "crax.training.agents.%s.train " ppo ppo_lag p3o focops ppo_pid ppo_saute crpo) cube train.onpolicy.core train.runner || exit 3

if [ "${TINY:-0}" = 1 ]; then
  SIZES=(--num-envs 8 --batch-size 8 --num-minibatches 4 --epochs 2 --tiny)
  T=${T:-32}; GRID_T=${GRID_T:-32}; GROUP=${GROUP:-2}
else
  SIZES=(--num-envs 2048 --batch-size 1024 --num-minibatches 32 --epochs 6)
  T=${T:-2000}; GRID_T=${GRID_T:-100}; GROUP=${GROUP:-32}
fi
ALGOS=${ALGOS:-ppo,ppo_lag,p3o,focops,ppo_pid,ppo_saute,crpo}
GRID_TASKS=${GRID_TASKS:-goal,circle,push,button}
GRID_ALGOS=${GRID_ALGOS:-ppo,ppo_lag,p3o,focops}
LIMIT=${LIMIT:-3000}
FILTER=(-e "Failed to import" -e "not actively being maintained" -e "warnings.warn(" -e "Delay kernel timed out")
rc=0

part() {  # part NAME: run "$@" after it under the part's deadline, lines to the log as they come
  local deadline=$1; shift
  local left=$((deadline - SECONDS))
  [ "$left" -gt 10 ] || { echo "(skipped: the part's LIMIT is spent)" | tee -a "$LOG"; return 124; }
  timeout -k 15 "$left" "$PY" bench/train_throughput.py "${SIZES[@]}" --cache "$CACHE" --crax-log "${CRAX_LOG:-on}" "$@" \
    2>&1 | grep --line-buffered -v "${FILTER[@]}" | tee -a "$LOG"
  return "${PIPESTATUS[0]}"
}

if [ "${PART:-both}" != grid ]; then
  echo "== $(date -u +%FT%TZ) part 1: one run each, ours vs crax, task ${TASK:-circle}, T $T (limit $LIMIT s)" | tee -a "$LOG"
  deadline=$((SECONDS + LIMIT))
  for algo in ${ALGOS//,/ }; do
    echo "-- $algo" | tee -a "$LOG"
    part "$deadline" --task "${TASK:-circle}" --algo "$algo" --episode-length "$T" --iterates "${ITERATES:-3}"
    r=$?; [ "$r" -eq 0 ] || { rc=$r; echo "($algo: rc=$r)" | tee -a "$LOG"; }
  done
  echo "== part 1 summary: env steps/s (compile excluded), ours / crax" | tee -a "$LOG"
  grep '^THROUGHPUT ' "$LOG" | awk '{for(i=2;i<=NF;i++){split($i,kv,"="); v[kv[1]]=kv[2]}
       printf "  %-10s ours %12.0f  crax %12.0f  ratio %.2fx\n", v["algo"], v["ours_sps"], v["crax_sps"], v["ratio"]}' \
    | tee -a "$LOG.summary"
  cat "$LOG.summary" >> "$LOG"; rm -f "$LOG.summary"
fi

if [ "${PART:-both}" != throughput ]; then
  echo "== $(date -u +%FT%TZ) part 2: the paper's grid, ours in vmapped groups of $GROUP vs crax one run at a time," \
       "T $GRID_T (limit $LIMIT s)" | tee -a "$LOG"
  deadline=$((SECONDS + LIMIT))
  for task in ${GRID_TASKS//,/ }; do
    for algo in ${GRID_ALGOS//,/ }; do
      echo "-- $task $algo" | tee -a "$LOG"
      part "$deadline" --task "$task" --algo "$algo" --episode-length "$GRID_T" --iterates "${GRID_ITERATES:-2}" \
        --group "$GROUP" --grid-runs 90 --grid-steps 5e8
      r=$?; [ "$r" -eq 0 ] || { rc=$r; echo "($task $algo: rc=$r)" | tee -a "$LOG"; }
    done
  done
  echo "== part 2 summary: device-hours of the measured cells (90 runs x 5e8 steps each)" | tee -a "$LOG"
  grep '^GRID ' "$LOG" | awk '{for(i=2;i<=NF;i++){split($i,kv,"="); v[kv[1]]=kv[2]}
       o+=v["ours_h"]; c+=v["crax_h"]; n++;
       printf "  %-8s %-9s ours %10.2f h  crax %10.2f h  ratio %.3f\n", v["task"], v["algo"], v["ours_h"], v["crax_h"], v["ratio"]}
       END {if (n) printf "  total over %d cell(s): ours %.2f h, crax %.2f h, ratio %.3f (goal <= 0.333: %s)\n", n, o, c, o/c, (o/c <= 1/3 ? "met" : "not met");
            else print "  no cell measured"}' | tee -a "$LOG.summary"
  cat "$LOG.summary" >> "$LOG"; rm -f "$LOG.summary"
fi
[ "${OFFPOLICY:-1}" = 1 ] && [ "${TINY:-0}" != 1 ] && { PYTHON="$PY" LIMIT="${OFFPOLICY_LIMIT:-1500}" bash bench/gpu_suite_offpolicy.sh ${OFFPOLICY_SIZES:-} || rc=$?; cat "$OUT/gpu_suite_offpolicy.log" >> "$LOG"; }  # SAC/SAC-Lag/SAC-PID (sizes: OFFPOLICY_SIZES, see that script)
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>/dev/null | tee -a "$LOG"
echo "== $(date -u +%FT%TZ) gpu suite rc=$rc (124: stopped at LIMIT), total $((SECONDS - t_start)) s" | tee -a "$LOG"
exit "$rc"
