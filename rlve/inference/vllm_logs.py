"""vLLM's log lines go to a file in the run's folder, not to the console.

vLLM logs a few hundred INFO and WARNING lines per start (one per layer when a float32
checkpoint is loaded into bfloat16), from this process and from its engine and worker
processes. `send_vllm_logs_to(folder)` writes a logging configuration that sends the `vllm`
logger to `folder/vllm.log` and points VLLM_LOGGING_CONFIG_PATH at it, so the processes vLLM
starts afterwards read it too; a vLLM already imported here is reconfigured at once. A user's
own VLLM_LOGGING_CONFIG_PATH is left alone.
"""

from __future__ import annotations

import json
import logging.config
import os
import sys
from pathlib import Path

LOG_FILE = "vllm.log"
CONFIG_FILE = "vllm_logging.json"
ENV = "VLLM_LOGGING_CONFIG_PATH"
_OURS = "_RLVE_VLLM_LOGGING"
"""set when rlve chose the path, so a later run may point it at its own folder"""


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
    if "vllm.logger" in sys.modules:  # vLLM configures its logging on import: again, here
        logging.config.dictConfig(config)
    return folder / LOG_FILE
