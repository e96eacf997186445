"""saferl training: the ten crax-bench trainers on its safety tasks, every episode written to the results cube.

Two sibling families over one shared floor (docs/ARCHITECTURE.md has the map and the recipe for a new trainer):
- `train.onpolicy`: the PPO core and PPO, PPO-Lag, P3O, FOCOPS (the paper's four), PPO-PID, PPO-Saute, CRPO;
- `train.offpolicy`: the SAC core and SAC, SAC-Lag, SAC-PID;
- the floor: one registry of both (`train.registry`), the multiplier rules (`train.multipliers`), the rollout
  bookkeeping (`train.rollout`), the paired exploration/greedy evaluator (`train.acting`), the compiled group
  program each family plugs into (`train.program`), configs (`train.config`, `train.overrides`,
  `train.variants`), networks and envs (`train.nets`, `train.envs`, `train.tasks`);
- the host: `train.runner` (one path for a group of runs of either family), sweeps and executors
  (`train.sweep`, `train.grouping`, `train.memory`, `train.sweep_run`, `train.executors`), `train.evaluate`,
  `train.cli` (`saferl train`, `saferl evaluate`).

Importing this package, the registry, the configs, the records and the host modules never imports jax; the
cores, losses and the floor's jax modules (`rollout`, `acting`, `nets`, `toy`) do, and the runner imports
jax when it trains.
"""
