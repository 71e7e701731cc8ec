"""The recipe's results table: teacher, SFT student and RL students by opponent and metric."""

from __future__ import annotations

from rlve.experiments.experiment import RunResult

OPPONENTS = {"optimal": 0.0, "random": 1.0, "imperfect": 0.3}
"""evaluation opponents: their random-move probability ("imperfect": the 30%-random one, which
a recipe plays when its `eval_opponents` name it)"""
STAGE_NAMES = {"teacher": "teacher", "sft": "SFT student", "rl": "RL student"}

TABLE_COLUMNS = (
    ("vs optimal W/D/L %", "optimal", ("win", "draw", "loss"), 100),
    ("vs random W/D/L %", "random", ("win", "draw", "loss"), 100),
    ("vs 30%-random W/D/L %", "imperfect", ("win", "draw", "loss"), 100),
    ("games with an invalid move % (opt/rand)", None, ("invalid",), 100),
    ("invalid moves per game (opt/rand)", None, ("invalid_moves",), 1),
    ("mistakes per game (opt/rand)", None, ("mistakes",), 1),
    ("format % (opt/rand)", None, ("format",), 100),
    (
        "vs optimal: wins / blocks / forks missed, % of chances",
        "optimal",
        ("missed_win_rate", "missed_block_rate", "fork_allowed_rate"),
        100,
    ),
    ("threats stated right % (opt/rand)", None, ("threats_stated_right",), 100),
    ("threats found, % of positions with one (opt/rand)", None, ("threats_found_rate",), 100),
)
"""(title, opponent or None for both, game/* metrics, scale: 100 shows a share as a percentage).
A mistake gives up a won or drawn result (tictactoe's `game.mistake_kind`)."""


def cell(values: list[float], scale: float, games: int | None) -> str:
    """`scale` x the mean over seeds with its [min-max]; one seed alone with its 95% interval
    (Wilson, over `games` games) in parentheses when the value is a rate; "-" when a run did
    not measure it (results stored before the metric existed)."""
    from rlve.evaluation import wilson_interval
    from rlve.experiments.seed_spread import mean_and_range

    if None in values:
        return "-"
    digits = 1 if scale == 100 else 2
    if len(values) > 1 or games is None or scale != 100:
        return mean_and_range([scale * v for v in values], digits=digits)
    low, high = wilson_interval(values[0], games)
    return f"{100 * values[0]:.1f} ({100 * low:.0f}-{100 * high:.0f})"


def table_rows(results: list[RunResult], teacher: dict[str, float]):
    """(row name, key -> the values over seeds): the teacher (scripted: its own evaluation), the
    SFT student (as the first arm's runs scored it before their first step) and one RL student
    per arm (named after it when there are several)."""
    arms = list(dict.fromkeys(r.arm for r in results))
    first = [r for r in results if r.arm == arms[0]]
    yield STAGE_NAMES["teacher"], lambda key: [teacher.get(key)]
    yield STAGE_NAMES["sft"], lambda key: [r.before.get(key) for r in first]
    for arm in arms:
        runs = [r for r in results if r.arm == arm]
        name = STAGE_NAMES["rl"] + (f" ({arm})" if len(arms) > 1 else "")
        yield name, lambda key, runs=runs: [r.after.get(key) for r in runs]


SHARED = {"optimal": "opt", "random": "rand"}
"""the opponents of the columns that show both, and their short names in the titles"""


def results_table(
    results: list[RunResult], teacher: dict[str, float], games: int, stated_threats: bool = True
) -> str:
    """Markdown: one row per stage (an RL row per arm), mean [min-max] over the seeds' results
    (the teacher is scripted: one row of its own evaluation). A column no stage measured (an
    opponent the recipe did not play, a metric older runs lack) is left out, and so are the
    threats columns unless the teacher `stated_threats` (its reasons: rlve.experiments.recipe)."""
    stages = list(table_rows(results, teacher))
    played = [
        o
        for o in SHARED
        if any(v is not None for _, values in stages for v in values(f"{o}/game/draw"))
    ]
    played = played or list(SHARED)
    rows = []
    for name, values in stages:
        cells = []
        for _, opponent, metrics, scale in TABLE_COLUMNS:
            opponents = (opponent,) if opponent else played
            cells.append([cell(values(f"{o}/game/{m}"), scale, games)
                          for o in opponents for m in metrics])  # fmt: skip
        rows.append((name, cells))
    kept = [i for i, (_, _, metrics, _) in enumerate(TABLE_COLUMNS)
            if any(set(cells[i]) != {"-"} for _, cells in rows)
            and (stated_threats or not metrics[0].startswith("threats"))]  # fmt: skip
    shared = "(" + "/".join(SHARED[o] for o in played) + ")"
    header = ["model", *(TABLE_COLUMNS[i][0].replace("(opt/rand)", shared) for i in kept)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, cells in rows:
        lines.append("| " + " | ".join([name, *(" / ".join(cells[i]) for i in kept)]) + " |")
    return "\n".join(lines)
