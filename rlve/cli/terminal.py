"""Model text on a terminal: shown, never obeyed.

A terminal acts on escape sequences in what it prints: ESC [ moves the cursor or clears the
screen, OSC 52 writes the clipboard, OSC 0 retitles the window; bidirectional overrides reorder
what the reader sees. Whatever a model wrote passes through `terminal_safe` before `print`.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 control characters except tab and newline; zero-width and bidirectional marks"""


def terminal_safe(text: str) -> str:
    """`text` with every unsafe character written as its escape (`\\x1b`, `\\u202e`)."""
    return _UNSAFE.sub(lambda match: match.group().encode("unicode_escape").decode(), text)
