"""One-line validation helpers shared by every config dataclass."""

from __future__ import annotations

from collections.abc import Sequence


def require(condition: bool, message: str) -> None:
    """Raise ValueError(message) unless `condition`: validation in one line."""
    if not condition:
        raise ValueError(message)


def require_choice(name: str, value: object, allowed: Sequence[object]) -> None:
    """Raise ValueError naming `name` unless `value` is one of `allowed`."""
    require(value in allowed, f"{name} must be one of {list(allowed)}, got {value!r}")


def is_int(value: object) -> bool:
    """An int that is not a bool (True is an int to Python, never a count to us)."""
    return isinstance(value, int) and not isinstance(value, bool)
