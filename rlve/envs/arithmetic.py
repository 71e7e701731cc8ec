"""Arithmetic for the double_check and calculator environments: seeded questions, a safe evaluator.

`random_problem` builds an expression of `+ - *` over random integers, so its answer is an exact
integer. `evaluate_expression` computes model-written arithmetic by walking its `ast` with an
allow-list of nodes and size limits: model text is never handed to `eval()`.
"""

from __future__ import annotations

import ast
import math
import operator
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_EXPRESSION_CHARS = 500
"""longest expression the evaluator reads; longer text is rejected before parsing"""
MAX_ABS_VALUE = 10**100
"""largest magnitude of any number in a computation, literal or intermediate"""
MAX_EXPONENT = 100
"""largest magnitude of an exponent of `**`"""


class ExpressionError(ValueError):
    """An expression the evaluator refuses or cannot compute; the message says why."""


@dataclass(frozen=True)
class ArithmeticProblem:
    """An expression such as `(482 - 37) * 59` and its exact integer value."""

    expression: str
    answer: int


# ---- the safe evaluator --------------------------------------------------------------------

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_ALLOWED = "numbers, + - * / // % **, unary minus and parentheses"
_MAX_TEXT = f"10**{round(math.log10(MAX_ABS_VALUE))}"


def evaluate_expression(expression: str) -> Number:
    """The value of an arithmetic expression, e.g. `"2 + 3 * (4 - 1)"` -> 11.

    Allowed: int and float literals, `+ - * / // % **`, unary `-` and `+`, parentheses.
    Raises ExpressionError (a ValueError) naming what is not allowed or too large.
    """
    if not isinstance(expression, str):
        raise ExpressionError(f"the expression must be a string, got {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(
            f"the expression has {len(expression)} characters; at most {MAX_EXPRESSION_CHARS}"
        )
    if not expression.strip():
        raise ExpressionError("the expression is empty")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ExpressionError(f"not a valid arithmetic expression ({exc})") from None
    try:
        return _value(tree.body)
    except RecursionError:
        raise ExpressionError("the expression is nested too deeply") from None


def _value(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant):
        # bool is an int subclass: `True + 1` is not arithmetic a model should lean on.
        if type(node.value) not in (int, float):
            raise ExpressionError(f"only numbers are allowed, got {node.value!r}")
        return _bounded(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _value(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        func = _BINARY.get(type(node.op))
        if func is None:
            hint = "; write powers as **" if isinstance(node.op, ast.BitXor) else ""
            raise ExpressionError(f"the operator {type(node.op).__name__} is not allowed{hint}")
        try:
            return _bounded(func(left, right))
        except ZeroDivisionError:
            raise ExpressionError("division by zero") from None
        except OverflowError:
            raise ExpressionError("a number is too large") from None
    if isinstance(node, ast.Name):
        raise ExpressionError(f"names are not allowed ({node.id!r}); only {_ALLOWED}")
    raise ExpressionError(f"{type(node).__name__} is not allowed; only {_ALLOWED}")


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ExpressionError(f"exponents must be within [-{MAX_EXPONENT}, {MAX_EXPONENT}]")
    # Estimate the size first so `9 ** 100 ** ...` is refused before it is computed.
    if abs(base) > 1 and exponent > 0:
        if exponent * math.log10(abs(base)) > math.log10(MAX_ABS_VALUE):
            raise ExpressionError(f"the result is larger than {_MAX_TEXT}")
    try:
        return _bounded(base**exponent)
    except ZeroDivisionError:
        raise ExpressionError("zero cannot be raised to a negative power") from None
    except OverflowError:
        raise ExpressionError("a number is too large") from None


def _bounded(value: object) -> Number:
    if isinstance(value, complex):
        raise ExpressionError(
            "the result is a complex number (a negative base to a fractional power)"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError("the result is not a finite number")
    if abs(value) > MAX_ABS_VALUE:  # type: ignore[arg-type]
        raise ExpressionError(f"a number is larger than {_MAX_TEXT}")
    return value  # type: ignore[return-value]


def format_number(value: Number) -> str:
    """A result as a model should read it: `6 / 2` gives "3", `1 / 3` gives "0.333333333333"."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return format(value, ".12g")
    return str(value)


_INTEGER = re.compile(r"[+-]?\d+(?:\.0*)?")


def parse_integer(text: str | None) -> int | None:
    """The integer a model wrote ("1,234", " -56 ", "7.0"), or None if the text is not one."""
    if text is None:
        return None
    cleaned = re.sub(r"[\s,_]", "", text).rstrip(".")
    if len(cleaned) > 200 or not _INTEGER.fullmatch(cleaned):
        return None
    return int(cleaned.split(".")[0])


# ---- the question generator ----------------------------------------------------------------

_PRECEDENCE = {"+": 1, "-": 1, "*": 2}
_ATOM = 3


def _render(node: int | tuple[str, object, object]) -> tuple[str, int]:
    """(text, precedence) with only the parentheses the value needs."""
    if isinstance(node, int):
        return str(node), _ATOM
    op, left, right = node
    prec = _PRECEDENCE[op]
    left_text, left_prec = _render(left)  # type: ignore[arg-type]
    right_text, right_prec = _render(right)  # type: ignore[arg-type]
    if left_prec < prec:
        left_text = f"({left_text})"
    # a - (b + c) needs its parentheses; a + (b - c) and a * (b * c) do not.
    if right_prec < prec or (right_prec == prec and op == "-"):
        right_text = f"({right_text})"
    return f"{left_text} {op} {right_text}", prec


def _random_tree(rng: random.Random, operands: list[int], operators: str):
    if len(operands) == 1:
        return operands[0]
    split = rng.randint(1, len(operands) - 1)
    op = rng.choice(operators)
    return (op, _random_tree(rng, operands[:split], operators),
            _random_tree(rng, operands[split:], operators))  # fmt: skip


def random_problem(
    rng: random.Random, num_operands: int, min_value: int, max_value: int, operators: str = "+-*"
) -> ArithmeticProblem:
    """An expression of `num_operands` integers in [min_value, max_value] joined by `operators`.

    The tree's shape and operators are random; its text has only necessary parentheses. The
    answer comes from `evaluate_expression` of that text, so question and answer cannot disagree.
    """
    if num_operands < 1:
        raise ValueError(f"num_operands must be >= 1, got {num_operands}")
    if not 0 <= min_value <= max_value:
        raise ValueError(f"need 0 <= min_value <= max_value, got {min_value}, {max_value}")
    if not operators or set(operators) - set(_PRECEDENCE):
        raise ValueError(f"operators must be drawn from '+-*', got {operators!r}")
    operands = [rng.randint(min_value, max_value) for _ in range(num_operands)]
    expression, _ = _render(_random_tree(rng, operands, operators))
    answer = evaluate_expression(expression)
    assert isinstance(answer, int), expression  # + - * over integers stays integral
    return ArithmeticProblem(expression, answer)


QUESTION = "What is {expression}?"


def question_rows(
    num_examples: int,
    seed: int,
    min_operands: int,
    max_operands: int,
    min_operand: int,
    max_operand: int,
) -> list[dict]:
    """Seeded dataset rows (question, answer, info) of random problems with `min_operands` to
    `max_operands` operands in [min_operand, max_operand]; the same seed gives the same rows."""
    rng = random.Random(seed)
    rows = []
    for _ in range(num_examples):
        num_operands = rng.randint(min_operands, max_operands)
        problem = random_problem(rng, num_operands, min_operand, max_operand)
        rows.append(
            {
                "question": QUESTION.format(expression=problem.expression),
                "answer": str(problem.answer),
                "info": {"expression": problem.expression, "num_operands": num_operands},
            }
        )
    return rows
