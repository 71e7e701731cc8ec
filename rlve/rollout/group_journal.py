"""Finished rollout groups appended to a JSON-lines file as they finish, read back after a crash.

Each line is one group with the index of the job that played it. A process killed mid-write
leaves at most a partial last line: reading drops it (and cuts it off the file), so a resumed
evaluation plays that job again and every job ends up in the file exactly once. Lines are JSON,
rebuilt into rlve's dataclasses field by field: reading a journal runs no code.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rlve.types import Fault, RolloutGroup, SideSequence, TeacherView, Trajectory


def group_to_json(group: RolloutGroup) -> dict[str, Any]:
    return asdict(group)


def trajectory_from_json(row: dict[str, Any]) -> Trajectory:
    fault = Fault(**row["fault"]) if row.get("fault") else None
    sides = [SideSequence(**side) for side in row.get("side_sequences", [])]
    spans = [tuple(span) for span in row.get("turn_spans", [])]
    seats = [trajectory_from_json(seat) for seat in row.get("seats", [])]
    view = TeacherView(**row["teacher_view"]) if row.get("teacher_view") else None
    return Trajectory(**{**row, "fault": fault, "side_sequences": sides, "turn_spans": spans,
                         "seats": seats, "teacher_view": view})  # fmt: skip


def group_from_json(data: dict[str, Any]) -> RolloutGroup:
    trajectories = [trajectory_from_json(row) for row in data["trajectories"]]
    return RolloutGroup(**{**data, "trajectories": trajectories})


class GroupJournal:
    """`path`'s finished groups by job index (`done`), and `append` for each new one."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.done: dict[int, RolloutGroup] = {}
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        good = 0  # bytes of complete, parseable lines
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                break
            self.done[record["job"]] = group_from_json(record["group"])
            good += len(line)
        if good < len(data):  # a line cut by a crash: played again
            with open(self.path, "r+b") as handle:
                handle.truncate(good)

    def append(self, job: int, group: RolloutGroup) -> None:
        """Write one finished group to the file (flushed and synced before it returns)."""
        line = json.dumps({"job": job, "group": group_to_json(group)}) + "\n"
        with open(self.path, "a") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        self.done[job] = group
