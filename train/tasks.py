"""The crax-bench 0.1.0 safety tasks `saferl train` trains, their cube labels and levels (no jax here).

A cube label names a task and its level: the four Point Level-1 tasks of the paper keep their short names
(`goal`, `circle`, `push`, `button`, so stores written before levels existed keep working), their other
levels are `goal_l2`, `circle_l3`, ...; every other task is `<family>_l<level>` (`lift_ant_l1`,
`velocity_walker2d_l3`, ...). `task_spec(label)` resolves a label (a one-line CubeError listing what
exists for anything else); `train.envs.make_crax_env` builds it.

crax's two level pitfalls, handled here (`TaskSpec.level_via`): `safe_lift_humanoid` takes its level only
as the constructor's `difficulty=` (crax's `get_environment(name, level=k)` prints a warning and builds
level 1), and the six `safe_velocity_*` tasks take theirs only as `velocity_threshold=` (the level-1
threshold times 1, 0.75, 0.5; `get_environment(name, level=k)` again warns and builds level 1).

`bound_scale` is what the `crax-suite` preset multiplies the paper's bounds by: the paper's d (15, 25, 50 at
T = 2000) is in units of the Point tasks' costs, where one violating step costs about 0.1 (Circle: 0.1 per
step outside the boundary), so d = 25 allows about 250 violating steps of 2000. Where one violating step
costs about 1 (a foot or the arm in a hazard, a step over the speed limit) d is multiplied by 10, so it
allows the same number of violating steps (docs/training.md has the table).
"""

from __future__ import annotations

from dataclasses import dataclass

from cube.errors import CubeError

LEVELS = (1, 2, 3)
"""Levels every crax-bench 0.1.0 safety task supports."""
POINT_FAMILIES = ("goal", "circle", "push", "button")
"""The paper's tasks (Safe * Point): their level-1 labels carry no level suffix."""
VELOCITY_AGENTS = ("ant", "humanoid", "halfcheetah", "hopper", "swimmer", "walker2d")


@dataclass(frozen=True)
class Family:
    """One crax safety task, all levels: its env name, default episode length, per-step cost, what d means."""

    name: str
    """Family name: the label without the level suffix (`goal`, `lift_ant`, `velocity_hopper`, ...)."""
    env: str
    """crax-bench env name (`crax.envs.get_environment`)."""
    episode_length: int
    """crax's default episode length T (the paper sets 2000 for every task; so does TrainConfig)."""
    cost: str
    """What one step costs (crax-bench 0.1.0, read from the env's code)."""
    bound_meaning: str
    """What a bound d means there (at the paper's T = 2000 unless said otherwise)."""
    bound_scale: float
    """The crax-suite preset's d = the paper's d x bound_scale (see the module docstring)."""
    level_via: str = "level"
    """How crax takes the level: "level" (`get_environment(env, level=k)`), "difficulty" (constructor
    `difficulty=k`) or "velocity_threshold" (constructor `velocity_threshold=` of level k)."""
    levels_meaning: str = ""
    """What levels 1/2/3 change."""
    reward: str = ""
    """crax-bench 0.1.0's reward per step, "dense: ..." (every step earns something) or "sparse: ..."
    (zero until an event: a short episode may earn nothing)."""

    @property
    def dense_reward(self) -> bool:
        """Whether every step's reward carries signal (a smoke run learns something in 64 steps)."""
        return self.reward.startswith("dense")


FAMILIES: tuple[Family, ...] = (
    Family("goal", "safe_goal_point", 1000,
           "2 x hazard proximity (graded, non-collidable hazards) + 3 per step in contact with a collidable one",
           "d = 25: ~25 steps halfway into a flat hazard, or ~8 collision steps", 1.0,
           levels_meaning="12 flat hazards / 8 flat + 8 pillars / 10 flat + 8 pillars (cubes and cylinders)",
           reward="sparse: +1 per goal reached (crax sets the distance term to 0)"),
    Family("circle", "safe_circle_point", 1000,
           "0.1 per step outside the boundary (|x| > 1.125 at L1); hazard proximity from L2",
           "d = 25: 250 steps outside the boundary", 1.0,
           levels_meaning="x walls / square boundary + 1 hazard / smaller square + 2 hazards",
           reward="dense: 0.1 x tangential speed / (1 + abs(radius - 1.5))"),
    Family("push", "safe_push_point", 2000,
           "2 x hazard proximity + 3 per contact step with a collidable hazard",
           "d = 25: ~25 steps halfway into a hazard, or ~8 contact steps", 1.0,
           levels_meaning="goal velocity 0 / 0.3 / 0.6",
           reward="dense: block-to-goal progress + 0.1 x agent-to-block progress, +1 per goal reached"),
    Family("button", "safe_button_point", 1000,
           "3 per collision step (pillars, gremlins) + 1 per wrong button press",
           "d = 25: ~8 collision steps", 1.0,
           levels_meaning="4 pillars + 4 gremlins / 8 + 6 / 12 + 8",
           reward="dense: progress toward the goal button, +1 per correct press"),
    Family("height_humanoid", "safe_height_humanoid", 1000,
           "0.1 per 8 cm (hinge margin) the head is above the max height, per step",
           "d = 25: 250 steps with the head 8 cm too high", 1.0,
           levels_meaning="max height 1.20 / 1.10 / 1.00 m",
           reward="dense: 5 x forward speed + 5 alive - control cost"),
    Family("lift_ant", "safe_lift_ant", 500,
           "1 per restricted foot on the ground, per step",
           "d = 250: 250 foot-steps on the ground", 10.0,
           levels_meaning="1 / 2 / 3 restricted feet",
           reward="dense: (forward speed + 1 alive - control cost) x 0.01"),
    Family("lift_spider", "safe_lift_spider", 500,
           "1 per restricted foot on the ground, per step",
           "d = 250: 250 foot-steps on the ground", 10.0,
           levels_meaning="2 / 3 / 4 restricted legs",
           reward="dense: (forward speed + 1 alive - control cost) x 0.01"),
    Family("lift_humanoid", "safe_lift_humanoid", 500,
           "cost_scale (1 / 2 / 3 by level) per step the non-hopping foot touches the ground",
           "d = 250: 250 steps with the foot down at L1 (125 at L2, ~83 at L3)", 10.0,
           level_via="difficulty", levels_meaning="cost scale 1 / 2 / 3 (+ airtime bonus at L3)",
           reward="dense: (forward speed + 1 alive - control cost) x 0.01 (+ airtime bonus at L3)"),
    Family("pathway_walker2d", "safe_pathway_walker2d", 2000,
           "1.5 x penetration^2 per hazard a foot is in, per step, + 5 at an unhealthy termination",
           "d = 250: ~250 steps with a foot deep in a hazard", 10.0,
           levels_meaning="max gap between hazards 6 / 4 / 2",
           reward="dense: (forward speed + 0.3 alive) x 0.01"),
    Family("reacher", "safe_reacher", 200,
           "1 per hazard the arm is in, per step",
           "d = 250: 250 arm-in-hazard steps", 10.0,
           levels_meaning="4 / 7 / 10 hazards",
           reward="dense: 0.1 x closeness^2 to the target, +1 per step within 2 cm"),
    *(Family(f"velocity_{agent}", f"safe_velocity_{agent}", 2000,
             "1 per step the speed is above the agent's threshold",
             "d = 250: 250 steps over the speed limit", 10.0, level_via="velocity_threshold",
             levels_meaning="speed threshold x1 / x0.75 / x0.5",
             reward="dense: the agent's locomotion reward (forward speed + alive - control cost) x 0.01")
      for agent in VELOCITY_AGENTS),
)
"""The 16 safety tasks of crax-bench 0.1.0, Point tasks first (its 17 registered `safe_*` names also hold
`safe_velocity`, a factory that builds the six velocity tasks by `agent=`)."""


@dataclass(frozen=True)
class TaskSpec:
    """One trainable task: a family at one level, under its cube label."""

    label: str
    family: Family
    level: int

    @property
    def env(self) -> str:
        """crax env name."""
        return self.family.env

    @property
    def velocity_agent(self) -> str | None:
        """The agent of a `safe_velocity_*` task (None otherwise)."""
        return self.family.name.removeprefix("velocity_") if self.family.level_via == "velocity_threshold" else None


def label_of(family: str, level: int) -> str:
    """The cube label of `family` at `level` (Point tasks at level 1: the family name alone)."""
    return family if family in POINT_FAMILIES and level == 1 else f"{family}_l{level}"


TASK_SPECS: dict[str, TaskSpec] = {label_of(f.name, k): TaskSpec(label_of(f.name, k), f, k)
                                   for f in FAMILIES for k in LEVELS}
"""Every trainable label -> its TaskSpec (16 tasks x 3 levels = 48)."""
PAPER_TASKS: tuple[str, ...] = POINT_FAMILIES
"""The paper's grid: the four Point tasks at level 1."""
LEVEL1_TASKS: tuple[str, ...] = tuple(label_of(f.name, 1) for f in FAMILIES)
"""Every task at level 1 (the crax-suite preset)."""


def known_labels() -> str:
    """What exists, in one line (for error messages)."""
    others = ", ".join(f.name for f in FAMILIES if f.name not in POINT_FAMILIES)
    return (f"{', '.join(POINT_FAMILIES)} (Point, level 1), {{{','.join(POINT_FAMILIES)}}}_l2/_l3 (their levels 2, 3), "
            f"and {{{others}}}_l1/_l2/_l3")


def task_spec(label: str) -> TaskSpec:
    """The TaskSpec of a cube label; a one-line CubeError naming what exists for an unknown task or level."""
    if label in TASK_SPECS:
        return TASK_SPECS[label]
    families = {f.name: f for f in FAMILIES}
    by_env = {f.env: f for f in FAMILIES}
    stem, sep, level = label.rpartition("_l")
    if sep and level.isdigit() and stem in families:
        if int(level) == 1 and stem in POINT_FAMILIES:
            raise CubeError(f"task '{label}': Point level 1 is labelled '{stem}' (levels 2, 3: {stem}_l2, {stem}_l3)")
        raise CubeError(f"task '{label}': crax-bench has levels {LEVELS[0]}-{LEVELS[-1]} of {stem}, not {level} "
                        f"(labels {', '.join(label_of(stem, k) for k in LEVELS)})")
    if label in families:
        raise CubeError(f"task '{label}' needs a level: {', '.join(label_of(label, k) for k in LEVELS)}")
    if label in by_env:
        name = by_env[label].name
        raise CubeError(f"task '{label}' is crax's env name; saferl labels it by level: "
                        f"{', '.join(label_of(name, k) for k in LEVELS)}")
    raise CubeError(f"unknown task '{label}'; choose from {known_labels()}")


def crax_bound(label: str, paper_bound: float) -> float:
    """The crax-suite bound of `label` for one of the paper's bounds (see the module docstring)."""
    return float(paper_bound) * task_spec(label).family.bound_scale
