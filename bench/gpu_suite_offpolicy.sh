#!/usr/bin/env bash
# Off-policy GPU suite (SAC, SAC-Lag, SAC-PID; issue 23), run from the repo root, sizes as arguments:
#     bash bench/gpu_suite_offpolicy.sh [NUM_ENVS [T [ITERATES [GROUP [REPLAY [BATCH [GRAD_UPDATES [HIDDEN]]]]]]]]
# defaults: crax's CLI sizes, 2048 envs, T 2000, 2 iterates (the first holds the compile), GROUP 4 seeds per
# vmapped program, replay 1e6 transitions per run, batch 1024 x 32 gradient steps per actor step, 256,256.
# Two parts, each line printed as it comes (a part stopped at LIMIT still leaves what finished):
#  1. `saferl train` (the runner: episodes and lambda/alpha written to a cube, paired evaluations and resume
#     points at the last iterate) for each of ALGOS (default sac,sac_lag,sac_pid) on TASK (default circle), one
#     vmapped group of GROUP seeds each; then per run env steps/s with the compile excluded (manifest env steps
#     of iterates 2.. / train_s), replay memory per run, final lambda and alpha (OFFPOLICY lines + summary).
#  2. learning side by side with crax's own trainers (bench/offpolicy_parity.py, seed 0, the same sizes, d/T as
#     the paper's 25/2000): train reward/cost, final evaluations, lambda, alpha and steps/s of both.
# Knobs (environment): PART (train, parity or both; default both), ALGOS, TASK, LIMIT (seconds per part, default
# 1500), OUT (where gpu_suite_offpolicy.log goes, default /tmp/out), PYTHON (python3), CACHE (jax compile cache,
# default $OUT/jaxcache). Tiny sizes run on a CPU: tests/test_train_offpolicy_cli.py runs it with TASK=toy.
# Expected on an H100 at the defaults: ~1-2 min compile + ~1 min per iterate of 4.1M env steps and 131k gradient
# steps per algorithm in part 1; part 2 about the same again per algorithm for each trainer.
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-2048}; T=${2:-2000}; J=${3:-2}; GROUP=${4:-4}; REPLAY=${5:-1000000}; BATCH=${6:-1024}; G=${7:-32}
HIDDEN=${8:-256,256}
OUT=${OUT:-/tmp/out}
PY=${PYTHON:-python3}
ALGOS=${ALGOS:-sac,sac_lag,sac_pid}
TASK=${TASK:-circle}
LIMIT=${LIMIT:-1500}
CACHE=${CACHE:-$OUT/jaxcache}
mkdir -p "$OUT"
LOG="$OUT/gpu_suite_offpolicy.log"
: > "$LOG"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1 SAFERL_JAX_CACHE="$CACHE"
[ "$TASK" = toy ] && export SAFERL_ENABLE_TOY=1
t_start=$SECONDS
rc=0
echo "== $(date -u +%FT%TZ) off-policy suite: $ALGOS on $TASK, $N envs, T $T, $J iterates, groups of $GROUP," \
     "replay $REPLAY, batch $BATCH x $G, hidden $HIDDEN" | tee -a "$LOG"

if [ "${PART:-both}" != parity ]; then
  RUN="$OUT/offpolicy_runs"
  rm -rf "$RUN" "$RUN.zarr"; mkdir -p "$RUN"
  cat > "$RUN/config.toml" <<EOF
total_env_steps = $((J * N * T))
episode_length = $T
num_envs = $N
batch_size = $BATCH
num_minibatches = $("$PY" -c "import math; print($N // math.gcd($BATCH, $N))")
eval_episodes = 32
[offpolicy]
max_replay_size = $REPLAY
grad_updates_per_step = $G
hidden = [$HIDDEN]
EOF
  bound=$("$PY" -c "print(25 * $T / 2000 if '$TASK' != 'toy' else 2)")
  seeds="0-$((GROUP - 1))"
  echo "== $(date -u +%FT%TZ) part 1: saferl train, d=$bound, seeds $seeds (limit $LIMIT s)" | tee -a "$LOG"
  timeout -k 15 "$LIMIT" "$PY" - train --config "$RUN/config.toml" --algos "$ALGOS" --tasks "$TASK" \
      --bounds "$bound" --seeds "$seeds" --parallel-runs "$GROUP" --out "$RUN.zarr" --no-progress <<'EOF' 2>&1 \
      | grep --line-buffered -v -e "Failed to import" -e "warnings.warn(" | tee -a "$LOG"
import argparse, sys
from train.cli import register
parser = argparse.ArgumentParser(prog="saferl")
register(parser.add_subparsers(dest="command"))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
EOF
  r=${PIPESTATUS[0]}; [ "$r" -eq 0 ] || { rc=$r; echo "(part 1: rc=$r)" | tee -a "$LOG"; }
  "$PY" - "$RUN.zarr" <<'EOF' 2>&1 | tee -a "$LOG"
import sys
import numpy as np
from cube import open_cube, read_manifests
from train.config import TrainConfig
from train.overrides import with_overrides
from train.offpolicy.config import from_train_config, fmt_bytes, run_replay_bytes
from train.sweep import make_env
rows = read_manifests(sys.argv[1])
ds = open_cube(sys.argv[1])
print("== part 1 summary: env steps/s per run (compile excluded), replay per run, final lambda / alpha")
for r in sorted(rows, key=lambda r: (r["algo"], r["seed"])):
    cfg = from_train_config(with_overrides(TrainConfig(), r["config"]))
    env = make_env(r["task"], cfg.episode_length)
    one = ds.sel(algo=r["algo"], task=r["task"], bound=r["bound"], seed=r["seed"])
    steps = np.asarray(one["env_steps"].values)
    done = int(np.isfinite(steps).sum())
    sps = (steps[done - 1] - steps[0]) / r["train_s"] if done > 1 and r.get("train_s") else float("nan")
    lam, alpha = (float(np.asarray(one[v].values)[done - 1]) if done else float("nan") for v in ("multiplier", "alpha"))
    print(f"OFFPOLICY algo={r['algo']} seed={r['seed']} status={r['status']} iterates={done} sps={sps:.0f} "
          f"compile_s={r.get('compile_s', float('nan')):.1f} group={r.get('group_size')} "
          f"replay={fmt_bytes(run_replay_bytes(cfg, env.obs_size, env.action_size)).replace(' ', '')} "
          f"lambda={lam:.4g} alpha={alpha:.4g}")
EOF
fi

if [ "${PART:-both}" != train ] && [ "$TASK" != toy ]; then
  echo "== $(date -u +%FT%TZ) part 2: learning side by side with crax (limit $LIMIT s)" | tee -a "$LOG"
  timeout -k 15 "$LIMIT" "$PY" bench/offpolicy_parity.py --task "$TASK" --algos "$ALGOS" --seeds 0 \
      --bound "$("$PY" -c "print(25 * $T / 2000)")" --iterates "$J" --num-envs "$N" --episode-length "$T" \
      --batch-size "$BATCH" --grad-updates "$G" --hidden "$HIDDEN" --replay "$REPLAY" --eval-episodes 32 2>&1 \
    | grep --line-buffered -v -e "Failed to import" -e "warnings.warn(" | tee -a "$LOG"
  r=${PIPESTATUS[0]}; [ "$r" -eq 0 ] || { rc=$r; echo "(part 2: rc=$r)" | tee -a "$LOG"; }
fi
echo "== $(date -u +%FT%TZ) off-policy suite rc=$rc (124: stopped at LIMIT), total $((SECONDS - t_start)) s" \
  | tee -a "$LOG"
exit "$rc"
