"""saferl training: PPO, PPO-Lag, P3O and FOCOPS on CRAX Safe Point tasks, written to the results cube.

Importing this package (and `train.config`, `train.algorithms`, `train.record`, `train.sweep`, `train.cli`)
never imports jax; the jax modules are `train.core`, `train.losses`, `train.nets`, `train.envs` (lazily),
`train.toy` and `train.runner` (lazily).
"""
