"""The two-run store the damage and remembered-read tests start from, and the one bit they flip in it."""

from __future__ import annotations

from pathlib import Path

from cube import CubeWriter, RunKey, create_store
from cube.store.layout import open_group, read_coords, run_index


def write_two_runs(path: Path, greedy: bool = False, note: bool = False) -> Path:
    """Runs ppo/goal/15/{0, 1} of a 1 x 1 x 1 x 2 grid (2 iterates, 3 episode slots), each with two training
    episodes per iterate (and two greedy ones when `greedy`), env steps, a status "complete" and a manifest
    (with a per-seed "note" when `note`)."""
    create_store(path, algos=["ppo"], tasks=["goal"], bounds=[15.0], seeds=[0, 1], n_iterates=2, n_episodes=3,
                 iterate_vars=("env_steps",))
    writer = CubeWriter(path)
    for seed in (0, 1):
        key = RunKey("ppo", "goal", 15.0, seed)
        for j in range(2):
            writer.write_episodes(key, "train", j, [1.0, 2.0], [3.0, 4.0])
            if greedy:
                writer.write_episodes(key, "greedy", j, [1.0, 2.0], [3.0, 40.0])
            writer.write_iterate_vars(key, j, {"env_steps": 100.0 * (j + 1)})
        manifest = {"iterates_done": 2, **({"note": f"seed {seed}"} if note else {})}
        writer.set_run_manifest(key, status="complete", manifest=manifest)
    return path


def flip_run_chunk(path: Path, array: str, key: RunKey) -> None:
    """Flip one bit in the middle of the first chunk file of `array` of run `key` (its CRC-32C then fails)."""
    index = run_index(read_coords(open_group(path, mode="r")), key)
    chunk = path / array / "c" / "/".join(map(str, index))
    chunk = chunk if chunk.is_file() else sorted(p for p in chunk.rglob("*") if p.is_file())[0]
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x10
    chunk.write_bytes(bytes(data))
