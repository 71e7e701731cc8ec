"""Progress bars that read well on a terminal and in a log file.

On a terminal a bar updates in place, several times a second. When stderr is a file or a pipe
(CI, `make demo > log`), every update is a new line, so the bar prints at most every
`LOG_INTERVAL_S` seconds (and at its end).
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm.auto import tqdm

LOG_INTERVAL_S = 30.0
"""seconds between a bar's lines when stderr is not a terminal"""


def progress_bar(**kwargs: Any) -> tqdm:
    """`tqdm(**kwargs)` with the update interval of where stderr goes."""
    if not sys.stderr.isatty():
        kwargs.setdefault("mininterval", LOG_INTERVAL_S)
        kwargs.setdefault("maxinterval", LOG_INTERVAL_S * 2)
    return tqdm(**kwargs)
