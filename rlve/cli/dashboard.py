"""`python -m rlve.cli.dashboard --entity E --project P`: rlve's W&B workspace, defined in code.

Line plots of the metrics rlve logs, in five sections (Reward, Game outcomes, Losses and ratios,
Curriculum, Speed), and the `rollouts` table. Saving needs a W&B login and the network;
`--print` shows what would be saved without either. Needs wandb-workspaces:
`pip install 'rlve[wandb-dashboard]'`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from rlve.training.rollout_table import ROLLOUT_TABLE


@dataclass(frozen=True)
class Plot:
    """One line plot over steps: the metrics named, or every metric `regex` matches (one line
    per environment for `env/.*/reward`)."""

    title: str
    metrics: tuple[str, ...] = ()
    regex: str | None = None


@dataclass(frozen=True)
class Section:
    """A titled group of panels in the workspace."""

    name: str
    plots: tuple[Plot, ...]


SECTIONS: tuple[Section, ...] = (
    Section("Reward", (
        Plot("mean reward", ("reward/mean",)),
        Plot("reward spread", ("reward/std", "reward/min", "reward/max")),
        Plot("reward by environment", regex="env/.*/reward"),
        Plot("accuracy by environment", regex="env/.*/accuracy"),
    )),
    Section("Game outcomes", (
        Plot("results (shares of games)",
             ("game/win", "game/draw", "game/loss", "game/unfinished")),
        Plot("invalid moves", ("game/invalid", "game/invalid_moves")),
        Plot("well-formed turns", ("game/format",)),
        Plot("threats stated (shares of answers)",
             ("game/threats_stated_right", "game/stated_right_moved_wrong")),
    )),
    Section("Losses and ratios", (
        Plot("loss", ("train/loss",)),
        Plot("clipped tokens", ("train/clip_frac", "train/clip_frac_low", "train/clip_frac_high")),
        Plot("policy ratio", ("train/ratio_mean", "train/ratio_min", "train/ratio_max")),
        Plot("sequence ratio", ("train/sequence_ratio_min", "train/sequence_ratio_max")),
        Plot("sampler importance ratio", ("sampling/is_ratio_mean", "sampling/is_ratio_max")),
        Plot("sampler correction (shares)", ("sampling/tis_masked_frac",
                                             "sampling/tis_truncated_frac",
                                             "sampling/tis_sequence_frac")),
        Plot("sampler vs trainer log-probs",
             ("sampling/logprob_diff_mean", "sampling/logprob_diff_max")),
        Plot("entropy and KL", ("train/entropy", "train/kl")),
        Plot("distillation: reverse KL to the teacher per token", ("distill/reverse_kl",)),
        Plot("distillation: reverse KL by quarter of the answer", regex="distill/reverse_kl_q.*"),
        Plot("distillation: teacher's log-prob and clipped share",
             ("distill/teacher_logprob", "distill/clip_frac")),
        Plot("gradient norm", ("train/grad_norm",)),
        Plot("learning rate", ("train/lr",)),
    )),
    Section("Curriculum", (
        Plot("lowest difficulty", regex="curriculum/.*/low"),
        Plot("highest difficulty", regex="curriculum/.*/high"),
        Plot("tic-tac-toe threats hint shown (probability)", ("game/hint_prob",)),
        Plot("accuracy in the window", regex="curriculum/.*/accuracy"),
        Plot("groups with a signal", ("batch/effective_prompt_ratio",
                                      "batch/mixed_outcome_ratio")),
    )),
    Section("Speed", (
        Plot("step time split (s)", ("perf/step_s", "perf/rollout_s", "perf/train_s",
                                     "perf/sync_s")),
        Plot("tokens per second", ("perf/rollout_tokens_per_s", "perf/train_tokens_per_s")),
        Plot("trainer TFLOP/s (achieved, peak)", ("perf/train_tflops", "perf/peak_tflops")),
        Plot("trainer MFU (share of peak)", ("perf/mfu",)),
        Plot("weight lag (steps)", ("sampling/weight_lag_mean", "sampling/weight_lag_max")),
        Plot("completion length (tokens)", ("completion/len_mean", "completion/len_max")),
    )),
)  # fmt: skip
"""the workspace's sections of line plots, in reading order (a Rollouts section follows)"""
ROLLOUTS_SECTION = "Rollouts"
"""the last section: the latest `rollouts` table of each run"""


def build_workspace(entity: str, project: str, name: str) -> Any:
    """The `wandb_workspaces.workspaces.Workspace` of SECTIONS and the rollouts table."""
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws

    def line_plot(plot: Plot) -> Any:
        if plot.regex is not None:
            return wr.LinePlot(title=plot.title, metric_regex=plot.regex)
        return wr.LinePlot(title=plot.title, y=list(plot.metrics))

    sections = [ws.Section(name=s.name, panels=[line_plot(p) for p in s.plots], is_open=True)
                for s in SECTIONS]  # fmt: skip
    table = wr.WeavePanelSummaryTable(table_name=ROLLOUT_TABLE, layout=wr.Layout(w=24, h=12))
    sections.append(ws.Section(name=ROLLOUTS_SECTION, panels=[table], is_open=True))
    return ws.Workspace(entity=entity, project=project, name=name, sections=sections)


def describe(workspace: Any) -> str:
    """The workspace as text: where it goes, each section, each panel and what it shows."""
    lines = [f"workspace {workspace.name!r} of {workspace.entity}/{workspace.project}"]
    for section in workspace.sections:
        lines.append(f"[{section.name}]")
        for panel in section.panels:
            kind = type(panel).__name__
            if kind == "LinePlot":
                shown = f"/{panel.metric_regex}/" if panel.metric_regex else ", ".join(panel.y)
                lines.append(f"  line plot {panel.title!r}: {shown}")
            elif kind == "WeavePanelSummaryTable":
                lines.append(f"  table: each run's latest {panel.table_name!r}")
            else:
                lines.append(f"  {kind}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Build the workspace and save it; with --print, or when saving fails, print it instead.
    Exits 0 when saved or printed on request, 1 when it could not be saved."""
    parser = argparse.ArgumentParser(prog="python -m rlve.cli.dashboard",
                                     description=__doc__.split("\n")[0])  # fmt: skip
    parser.add_argument("--entity", required=True, help="W&B entity (user or team)")
    parser.add_argument("--project", required=True, help="W&B project of the runs")
    parser.add_argument("--name", default="rlve", help="the workspace's name")
    parser.add_argument("--print", action="store_true", dest="print_only",
                        help="print what would be saved, and save nothing")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        workspace = build_workspace(args.entity, args.project, args.name)
    except ImportError:
        print("the dashboard needs wandb-workspaces: pip install 'rlve[wandb-dashboard]'",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(1) from None
    if args.print_only:
        print(describe(workspace))
        print("not saved: --print")
        return
    try:
        workspace.save()
    except Exception as exc:  # no login, no network, no such entity: say so and show the spec
        print(describe(workspace))
        print(f"not saved: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"saved: {workspace.url}")


if __name__ == "__main__":
    main()
