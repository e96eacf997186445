"""The on-policy algorithm records, one module each (`ppo`, `ppo_lag`, `p3o`, `focops`, `ppo_pid`,
`ppo_saute`, `crpo`), and their record type (`base.Algorithm`); `train.registry` registers them."""
