"""The tiny toy-task training config the sweep tests share, as the TOML text `saferl train --config` reads."""

from __future__ import annotations


def toy_config_toml(n_iterates: int, n_envs: int) -> str:
    """`n_iterates` iterates of one 20-step episode per env, `n_envs` envs, evaluation and resume point
    every 2 iterates, 8-unit networks."""
    return f"""total_env_steps = {n_iterates * n_envs * 20}
episode_length = 20
num_envs = {n_envs}
unroll_length = 4
batch_size = 8
num_minibatches = 2
num_epochs = 1
policy_hidden = [8]
value_hidden = [8]
cost_value_hidden = [8]
eval_episodes = 5
eval_every = 2
"""
