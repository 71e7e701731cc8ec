"""vLLM's log lines go to a file in the run's folder, not to the console.

vLLM logs a few hundred INFO and WARNING lines per start (one per layer when a float32
checkpoint is loaded into bfloat16), from this process and from its engine and worker
processes. `send_vllm_logs_to(folder)` writes a logging configuration that sends the `vllm`
logger to `folder/vllm.log` and points VLLM_LOGGING_CONFIG_PATH at it, so the processes vLLM
starts afterwards read it too; this process's `vllm` logger is configured at once (vLLM logs
while it is imported, before it reads the variable). A user's own VLLM_LOGGING_CONFIG_PATH is
left alone.

What vLLM's processes print outside logging (weight-loading bars, torch's C++ warnings, Python
warnings) goes to the same file: `children_print_to_log()` points this process's stdout and
stderr at it while vLLM starts them, so they inherit the file, and restores them afterwards.
"""

from __future__ import annotations

import json
import logging.config
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOG_FILE = "vllm.log"
CONFIG_FILE = "vllm_logging.json"
ENV = "VLLM_LOGGING_CONFIG_PATH"
_OURS = "_RLVE_VLLM_LOGGING"
"""set when rlve chose the path, so a later run may point it at its own folder"""
_log_file: Path | None = None
"""the file of the last `send_vllm_logs_to` here; None: vLLM prints where it likes"""


def logging_config(log_file: Path) -> dict:
    return {
        "version": 1,
        "disable_existing_loggers": False,  # rlve's own loggers keep printing
        "formatters": {"plain": {
            "format": "%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s"}},
        "handlers": {"file": {"class": "logging.FileHandler", "filename": str(log_file),
                              "formatter": "plain", "level": "INFO"}},
        "loggers": {"vllm": {"handlers": ["file"], "level": "INFO", "propagate": False}},
    }  # fmt: skip


def send_vllm_logs_to(folder: str | Path) -> Path | None:
    """Send vLLM's logs to `folder/vllm.log`; returns that path (None when the user set their
    own VLLM_LOGGING_CONFIG_PATH)."""
    if os.environ.get(ENV) and not os.environ.get(_OURS):
        return None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = logging_config(folder / LOG_FILE)
    config_path = folder / CONFIG_FILE  # written before any process that reads it starts
    config_path.write_text(json.dumps(config, indent=1))
    os.environ[ENV] = str(config_path.resolve())
    os.environ[_OURS] = "1"
    logging.config.dictConfig(config)
    global _log_file
    _log_file = folder / LOG_FILE
    return _log_file


@contextmanager
def children_print_to_log() -> Iterator[Path | None]:
    """While it lasts, file descriptors 1 and 2 of this process are the vLLM log file (when
    `send_vllm_logs_to` chose one), so the processes started meanwhile print there for good;
    yields the file. Whatever this process prints meanwhile goes there too."""
    if _log_file is None:
        yield None
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(_log_file, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        yield _log_file
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in ((1, saved[0]), (2, saved[1])):
            os.dup2(copy, fd)
            os.close(copy)
