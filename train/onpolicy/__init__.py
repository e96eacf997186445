"""The on-policy family: the PPO core and the algorithms that train on it (PPO, PPO-Lag, P3O, FOCOPS, PPO-PID,
PPO-Saute, CRPO), as crax-bench trains them.

- `algorithms`: one record module per algorithm (`base.Algorithm`: its policy loss, multiplier or state update,
  env adapter); `train.registry` registers them.
- `losses`: the pure loss and advantage functions (jax); the Lagrange and PID rules are the floor's
  (`train.multipliers`).
- `saute`: PPO-Saute's budget task as an env adapter.
- `core`: `make_train(config, env)` -> init / iterate / evaluate, vmappable over runs.
- `family`: the family's hooks of the group program (`ONPOLICY_FAMILY`, `train.program`).

Importing this package, `algorithms`, `saute` and `family` needs no jax; `core` and `losses` do.
"""
