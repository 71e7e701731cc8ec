"""Text from a model or an environment, made safe at one place before it is tokenized, logged,
printed or written.

Either can hold what breaks the code around it: a lone surrogate (a REPL cell that prints
'\\ud800', or a remote engine's JSON) makes a tokenizer raise and a UTF-8 file write fail;
escape sequences reach a terminal, where ESC [ moves the cursor or clears a line (a forged log
line), OSC 52 writes the clipboard, OSC 0 retitles the window, and bidirectional overrides
reorder what the reader sees.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
"""C0 and C1 control characters except tab and newline; zero-width and bidirectional marks;
surrogates"""

REPLACEMENT = "\ufffd"


def without_surrogates(text: str) -> str:
    """`text` with every surrogate code point replaced by U+FFFD: what a tokenizer and a UTF-8
    file take (a pair spelled as two code points is two replacements)."""
    return _SURROGATE.sub(REPLACEMENT, text)


def clean_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with their text content `without_surrogates` (other fields as they were)."""
    return [
        {**m, "content": without_surrogates(m["content"])}
        if isinstance(m.get("content"), str) else m
        for m in messages
    ]  # fmt: skip


def terminal_safe(text: str) -> str:
    """`text` with every unsafe character written as its escape (`\\x1b`, `\\u202e`,
    `\\ud800`): shown on a terminal or in a log, never obeyed."""
    return _UNSAFE.sub(lambda match: match.group().encode("unicode_escape").decode(), text)
