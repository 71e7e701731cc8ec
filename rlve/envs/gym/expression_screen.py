"""A screen for model text on its way to an expression parser that evaluates (sympy's does).

`sympy.sympify` and `parse_expr` run `eval` on the text with Python's builtins in reach, so
`__import__('os').system(...)` in an answer would run. The screen lets through only arithmetic
on whitelisted names; it reads the text (characters, then Python tokens) and evaluates nothing.
It does not bound the cost of the math itself (`9**9**9`): run the parse in a `VerifierPool`.
"""

from __future__ import annotations

import io
import keyword
import string
import tokenize
from collections.abc import Set

DEFAULT_ALLOWED_NAMES: frozenset[str] = frozenset(string.ascii_letters) | frozenset(
    {
        "sqrt", "cbrt", "root", "pi", "oo", "exp", "log", "ln",
        "sin", "cos", "tan", "asin", "acos", "atan",
        "Abs", "factorial", "binomial", "floor", "ceiling", "gcd", "lcm", "Rational",
    }
)  # fmt: skip
"""single ASCII letters (x, y, n, k, E, I, ...) and common math functions and constants"""


class UnsafeExpression(ValueError):
    """Text that must not reach an expression parser; the message says why."""


# Characters worth naming in the message; everything else outside _ALLOWED_CHARACTERS is
# reported by its code point. Non-ASCII is refused because Python folds letters such as
# fullwidth 'ｅｘｅｃ' into 'exec' (NFKC), which a name check on the raw text would miss.
_NAMED_CHARACTERS = {
    ";": "a semicolon",
    "`": "a backtick",
    "'": "a quote",
    '"': "a quote",
    "\\": "a backslash (line continuation or escape)",
    "\n": "a line break",
    "\r": "a line break",
    "#": "a comment sign",
    ":": "a colon (lambda, slice or walrus)",
    "@": "an at sign (decorator or matrix product)",
}
_ALLOWED_CHARACTERS = frozenset(string.ascii_letters + string.digits + " \t+-*/^()[]{},.=<>!%&|~_")
_ALLOWED_OPERATORS = frozenset("+ - * / ** // % ^ ( ) [ ] { } , = == != < > <= >= & | ~ !".split())
_CLOSING = {")": "(", "]": "[", "}": "{"}
_HARMLESS_TOKENS = {tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER}


def screen_expression(
    text: str,
    *,
    allowed_names: Set[str] = DEFAULT_ALLOWED_NAMES,
    max_length: int = 2000,
    max_depth: int = 50,
) -> str:
    """Return `text` stripped of surrounding whitespace if it is plain arithmetic on
    `allowed_names`; raise `UnsafeExpression` saying why otherwise.

    Refused: text longer than `max_length`; double underscores; quotes, backticks, semicolons,
    backslashes, line breaks, colons, '#', '@' and any non-ASCII character; brackets nested
    deeper than `max_depth` or unbalanced; Python keywords (`lambda`, `import`, ...); names not
    in `allowed_names`; attribute access ('.') and operators outside plain arithmetic and
    comparison (shifts, walrus, ...).
    """
    if not isinstance(text, str):
        raise UnsafeExpression(f"expected a string, got {type(text).__name__}")
    if len(text) > max_length:
        raise UnsafeExpression(
            f"expression is {len(text)} characters long; the limit is {max_length}"
        )
    text = text.strip()
    if not text:
        raise UnsafeExpression("expression is empty")
    if "__" in text:
        raise UnsafeExpression("expression contains a double underscore (dunder)")
    _check_characters(text)
    _check_brackets(text, max_depth)
    _check_tokens(text, allowed_names)
    return text


def _check_characters(text: str) -> None:
    for char in text:
        if char in _ALLOWED_CHARACTERS:
            continue
        what = _NAMED_CHARACTERS.get(char, f"the character {char!r} (U+{ord(char):04X})")
        raise UnsafeExpression(f"expression contains {what}")


def _check_brackets(text: str, max_depth: int) -> None:
    # Before tokenizing: Python's tokenizer has its own nesting limit and a less clear message.
    open_brackets: list[str] = []
    for char in text:
        if char in "([{":
            open_brackets.append(char)
            if len(open_brackets) > max_depth:
                raise UnsafeExpression(f"brackets nest deeper than the limit of {max_depth}")
        elif char in _CLOSING:
            if not open_brackets or open_brackets.pop() != _CLOSING[char]:
                raise UnsafeExpression(f"unbalanced brackets: unexpected {char!r}")
    if open_brackets:
        raise UnsafeExpression(f"unbalanced brackets: {open_brackets[-1]!r} is never closed")


def _check_tokens(text: str, allowed_names: Set[str]) -> None:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as error:
        raise UnsafeExpression(f"expression cannot be tokenized: {error}") from None
    for token in tokens:
        kind, value = token.type, token.string
        if kind == tokenize.NAME:
            if keyword.iskeyword(value):
                raise UnsafeExpression(f"expression contains the Python keyword {value!r}")
            if value not in allowed_names:
                raise UnsafeExpression(f"name {value!r} is not allowed")
        elif kind == tokenize.OP or (kind == tokenize.ERRORTOKEN and value == "!"):
            # '!' is an error token before Python 3.12; sympy reads it as a factorial.
            if value == ".":
                raise UnsafeExpression("expression contains attribute access ('.')")
            if value not in _ALLOWED_OPERATORS:
                raise UnsafeExpression(f"operator {value!r} is not allowed")
        elif kind != tokenize.NUMBER and kind not in _HARMLESS_TOKENS:
            raise UnsafeExpression(f"unexpected token {value!r} ({tokenize.tok_name[kind]})")
