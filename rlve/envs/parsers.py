"""Parsers: pull the parts a reward function needs out of model text, apart from scoring.

`Parser` passes text through; `XMLParser` reads tagged fields (`<move>4</move>`); `ThinkParser`
drops a leading `<think>...</think>` block. Each offers `parse_answer(completion)` (the answer in
the last assistant message that has one) and `format_reward_func()` (a rubric-ready function).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from rlve.types import Message


def assistant_texts(completion: Sequence[Message] | str) -> list[str]:
    """The contents of the assistant messages of a completion (a bare string counts as one)."""
    if isinstance(completion, str):
        return [completion]
    return [str(m.get("content") or "") for m in completion if m.get("role") == "assistant"]


def tagged_spans(text: str, open_tag: str, close_tag: str) -> Iterator[tuple[int, int]]:
    """The [start, end) of each `open_tag`...`close_tag` block, tags included, in one pass over
    `text`. An unclosed tag ends the scan: no later tag can close either (a lazy regex would
    search the rest of the text again from every one of them, quadratic in a reply of unclosed
    tags)."""
    start = text.find(open_tag)
    while start != -1:
        end = text.find(close_tag, start + len(open_tag))
        if end == -1:
            return
        yield start, end + len(close_tag)
        start = text.find(open_tag, end + len(close_tag))


def tagged_bodies(text: str, open_tag: str, close_tag: str) -> Iterator[str]:
    """The text between each `open_tag` and the next `close_tag` (`tagged_spans`)."""
    for start, end in tagged_spans(text, open_tag, close_tag):
        yield text[start + len(open_tag) : end - len(close_tag)]


class Parser:
    """The identity parser: the answer is the whole text of the last assistant message."""

    def parse(self, text: str) -> str | None:
        return text.strip()

    def parse_answer(self, completion: Sequence[Message] | str) -> str | None:
        """The parsed answer of the last assistant message that yields one."""
        for text in reversed(assistant_texts(completion)):
            answer = self.parse(text)
            if answer:
                return answer
        return None

    def is_well_formed(self, text: str) -> bool:
        return bool(text.strip())

    def format_reward_func(self) -> Callable[..., float]:
        """A reward function: the share of assistant messages that are well formed."""

        def format_reward(completion: Sequence[Message] | str) -> float:
            texts = assistant_texts(completion)
            if not texts:
                return 0.0
            return sum(self.is_well_formed(t) for t in texts) / len(texts)

        return format_reward


@dataclass(frozen=True)
class XMLField:
    """A tagged field: its canonical name and the tag names accepted for it."""

    name: str
    tags: tuple[str, ...]

    @staticmethod
    def of(spec: str | Sequence[str]) -> XMLField:
        if isinstance(spec, str):
            return XMLField(spec, (spec,))
        tags = tuple(spec)
        if not tags:
            raise ValueError("an XMLParser field needs at least one tag name")
        return XMLField(tags[0], tags)


class XMLParser(Parser):
    """Reads `<tag>value</tag>` fields; the last match of each field wins.

    `fields` lists field names, or tuples of alternative tag names whose first entry is the
    canonical name (`("answer", "final")` accepts `<final>` as the answer). `answer_field` names
    the field `parse_answer` returns. A message is well formed when every field appears.
    """

    def __init__(self, fields: Sequence[str | Sequence[str]], answer_field: str | None = None):
        self.fields = [XMLField.of(f) for f in fields]
        if not self.fields:
            raise ValueError("XMLParser needs at least one field")
        self.answer_field = answer_field or self.fields[-1].name
        names = [f.name for f in self.fields]
        if self.answer_field not in names:
            raise ValueError(f"answer_field {self.answer_field!r} is not one of the fields {names}")

    def parse_fields(self, text: str) -> dict[str, str | None]:
        """Each field's value (stripped) from its last occurrence in `text`, or None.

        Found with `rfind` (the last closing tag, then the nearest opening tag before it), so
        hostile text such as a megabyte of unclosed tags costs linear time, unlike a lazy regex.
        """
        values: dict[str, str | None] = {}
        for field in self.fields:
            best: tuple[int, str] | None = None
            for tag in field.tags:
                found = last_tagged(text, tag)
                if found is not None and (best is None or found[0] > best[0]):
                    best = found
            values[field.name] = best[1].strip() if best else None
        return values

    def parse(self, text: str) -> str | None:
        return self.parse_fields(text)[self.answer_field]

    def is_well_formed(self, text: str) -> bool:
        return all(v is not None for v in self.parse_fields(text).values())

    def format(self, **values: str) -> str:
        """Render fields in declaration order, e.g. `format(think="...", move="4")`."""
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}; fields are {self.field_names}")
        return "\n".join(
            f"<{f.name}>{values[f.name]}</{f.name}>" for f in self.fields if f.name in values
        )

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


class ThinkParser(Parser):
    """Drops the reasoning: the answer is what follows the last `</think>`.

    A message is well formed when it opens with exactly one `<think>...</think>` block followed by
    a non-empty answer. `extract` post-processes the answer text (e.g. pull a boxed number).
    """

    def __init__(self, extract: Callable[[str], str | None] | None = None):
        self.extract = extract

    def parse(self, text: str) -> str | None:
        if "</think>" in text:
            text = text.rsplit("</think>", 1)[1]
        elif "<think>" in text:
            return None  # reasoning never closed: no answer was given
        text = text.strip()
        if self.extract is not None:
            return self.extract(text)
        return text or None

    def is_well_formed(self, text: str) -> bool:
        stripped = text.strip()
        if not stripped.startswith("<think>"):
            return False
        if stripped.count("<think>") != 1 or stripped.count("</think>") != 1:
            return False
        return bool(stripped.split("</think>", 1)[1].strip())


def last_tagged(text: str, tag: str) -> tuple[int, str] | None:
    """(position, content) of the last `<tag>content</tag>` in `text`, or None."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    end = text.rfind(closing)
    if end < 0:
        return None
    start = text.rfind(opening, 0, end)
    if start < 0:
        return None
    return start, text[start + len(opening) : end]


_BOXED = re.compile(r"\\boxed\{")


def extract_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}`, with balanced braces; None if there is none."""
    starts = [m.end() for m in _BOXED.finditer(text)]
    if not starts:
        return None
    start = starts[-1]
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i].strip()
    return None
