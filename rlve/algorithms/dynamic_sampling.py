"""DAPO dynamic sampling: drop rollout groups whose rewards are all equal.

Such a group has zero advantage everywhere, so it only dilutes the batch (Yu et al. 2025,
section 3.2). The trainer keeps asking for groups until enough survive.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlve.types import RolloutGroup


@dataclass(frozen=True)
class FilterResult:
    """Groups split by whether they carry a learning signal."""

    kept: list[RolloutGroup]
    """groups whose rewards are not all equal, in input order"""
    dropped: list[RolloutGroup]
    """groups whose rewards are all equal (or that hold a single rollout), in input order"""

    @property
    def effective_prompt_ratio(self) -> float:
        """Share of groups kept (`batch/effective_prompt_ratio`); 0.0 when there were none."""
        total = len(self.kept) + len(self.dropped)
        return len(self.kept) / total if total else 0.0


def filter_groups(groups: list[RolloutGroup]) -> FilterResult:
    """Split `groups` into those with a group-relative signal (`RolloutGroup.has_signal`) and
    the rest. The dropped groups still count for the curriculum; the caller reports them."""
    kept = [group for group in groups if group.has_signal]
    dropped = [group for group in groups if not group.has_signal]
    return FilterResult(kept=kept, dropped=dropped)
