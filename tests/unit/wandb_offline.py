"""Reading back an offline W&B run, as `wandb sync` would upload it: its run record (job type,
config), its history rows and the table files under its files/ folder.

wandb 0.31 writes the `.wandb` file from its Go core and ships no Python reader, so this reads the
format itself: a 7-byte header (":W&B", magic 0xBEE1, version 0), then LevelDB log records
(32 KiB blocks; each chunk has a crc32, a length and a type: full, first, middle or last) whose
payloads are `wandb_internal_pb2.Record` protobufs.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

BLOCK = 32 * 1024
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    """What one offline run holds."""

    folder: Path
    job_type: str
    config: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    """one dict per logged row, by the keys logged, `_step` included"""

    def table(self, key: str, step: int) -> dict[str, Any]:
        """The JSON of the table logged under `key` at `step` (columns, data)."""
        (row,) = [r for r in self.history if r.get("_step") == step and key in r]
        return json.loads((self.folder / "files" / row[key]["path"]).read_text())


def read_offline_run(wandb_dir: Path, wait_s: float = 20.0) -> OfflineRun:
    """The only offline run under `wandb_dir` (the `wandb/` folder of a run directory).

    wandb's core finishes writing the file a moment after `run.finish()` returns (measured: the
    second run of a process may still hold only the header): this waits for the exit record.
    """
    (folder,) = sorted(wandb_dir.glob("offline-run-*"))
    (path,) = folder.glob("run-*.wandb")
    deadline = time.monotonic() + wait_s
    while not any(r.WhichOneof("record_type") == "exit" for r in records(path)):
        assert time.monotonic() < deadline, f"{path} got no exit record in {wait_s} s"
        time.sleep(0.1)
    run = None
    history = []
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            config = {u.key: json.loads(u.value_json) for u in record.run.config.update}
            config.pop("_wandb", None)
            run = OfflineRun(folder, record.run.job_type, config)
        elif kind == "history":
            history.append(_row(record.history.item))
    assert run is not None, f"{path} has no run record"
    run.history = history
    return run


def records(path: Path):
    """The Record protobufs of a `.wandb` file, in order."""
    data = path.read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:CHUNK_HEADER])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), f"{path} is no .wandb file"
    pos, payload = CHUNK_HEADER, b""
    while pos + CHUNK_HEADER <= len(data):
        left_in_block = BLOCK - pos % BLOCK
        if left_in_block < CHUNK_HEADER:  # the block's tail is padding
            pos += left_in_block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + CHUNK_HEADER])
        if kind == 0:  # zeros to the end of the block
            pos += left_in_block
            continue
        if pos + CHUNK_HEADER + length > len(data):  # still being written
            return
        payload += data[pos + CHUNK_HEADER : pos + CHUNK_HEADER + length]
        pos += CHUNK_HEADER + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            payload = b""
            yield record


def _row(items) -> dict[str, Any]:
    """One history row: a metric is one item ("train/loss" is one key), a table one item per
    field (["rollouts", "path"], ["rollouts", "nrows"]...), gathered under its key."""
    row: dict[str, Any] = {}
    for item in items:
        keys = list(item.nested_key) or [item.key]
        place = row
        for key in keys[:-1]:
            place = place.setdefault(key, {})
        place[keys[-1]] = json.loads(item.value_json)
    return row
