"""The W&B dashboard in code: its sections, panels of metrics rlve really logs, and what it says
when it cannot save."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("wandb_workspaces")

from rlve.cli.dashboard import SECTIONS, build_workspace, main  # noqa: E402

RLVE = Path(__file__).resolve().parents[2] / "rlve"
SECTION_NAMES = ["Reward", "Game outcomes", "Losses and ratios", "Curriculum", "Speed", "Rollouts"]


def logged_names() -> set[str]:
    """Every string literal in rlve's code (but the dashboard's) that looks like a metric name,
    f-string fields as `{}` (`f"env/{name}/reward"` -> `env/{}/reward`)."""
    names = set()
    for path in RLVE.rglob("*.py"):
        if path.name != "dashboard.py":
            for literal in re.findall(r'f?"([a-z_]+/[^"\s]*)"', path.read_text()):
                names.add(re.sub(r"\{[^}]*\}", "{}", literal))
    return names


def test_print_lists_the_sections_and_panels_and_saves_nothing(capsys):
    main(["--entity", "me", "--project", "rlve", "--print"])
    printed = capsys.readouterr().out
    assert re.findall(r"^\[(.+)\]$", printed, re.MULTILINE) == SECTION_NAMES
    assert "workspace 'rlve' of me/rlve" in printed
    assert ("line plot 'clipped tokens': train/clip_frac, train/clip_frac_low, "
            "train/clip_frac_high") in printed  # fmt: skip
    assert "line plot 'highest difficulty': /curriculum/.*/high/" in printed
    assert "table: each run's latest 'rollouts'" in printed
    assert printed.endswith("not saved: --print\n")


def test_every_panel_shows_a_metric_the_code_logs():
    logged = logged_names()
    for section in SECTIONS:
        for plot in section.plots:
            for metric in plot.metrics:
                assert metric in logged, f"{section.name} / {plot.title}: nothing logs {metric}"
            if plot.regex:  # an f-string such as f"curriculum/{name}/high" fills it
                filled = [n.replace("{}", "x") for n in logged if "{}" in n]
                assert any(re.fullmatch(plot.regex, n) for n in filled), plot.regex


def test_the_workspace_holds_the_rollouts_table_panel():
    workspace = build_workspace("me", "rlve", "rlve")
    (table,) = workspace.sections[-1].panels
    assert (type(table).__name__, table.table_name) == ("WeavePanelSummaryTable", "rollouts")
    assert sum(len(s.panels) for s in workspace.sections) == 32 + 1


def test_a_failed_save_prints_the_workspace_and_exits_1(monkeypatch, capsys):
    import wandb_workspaces.workspaces as ws

    def no_login(self):
        raise RuntimeError("No API key configured")

    monkeypatch.setattr(ws.Workspace, "save", no_login)
    with pytest.raises(SystemExit) as exit_info:
        main(["--entity", "me", "--project", "rlve"])
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert "[Losses and ratios]" in captured.out
    assert captured.err == "not saved: RuntimeError: No API key configured\n"
