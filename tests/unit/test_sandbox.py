"""Verification in worker processes, and the screen for text bound for an expression parser.

The functions run in workers are builtins (math.sqrt, time.sleep, os._exit ...) or module-level
functions of this file: a worker gets them by pickling, that is by name.
"""

import asyncio
import math
import os
import pathlib
import re
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlve.envs.gym.expression_screen import UnsafeExpression, screen_expression
from rlve.envs.gym.sandbox import VerifierPool


@pytest.fixture(scope="module")
def pool():
    # A generous timeout: the first call in a worker imports this file (and sympy, later).
    with VerifierPool(num_workers=2, timeout_s=120.0, memory_limit_mb=1024) as shared:
        yield shared


def _write_pid(path: str) -> None:
    pathlib.Path(path).write_text(str(os.getpid()))


def _screen_then_sympify(text: str) -> str:
    import sympy

    try:
        return str(sympy.sympify(screen_expression(text)))
    except UnsafeExpression as error:
        return f"rejected: {error}"


def _sympify_unscreened(text: str) -> str:
    import sympy

    return str(sympy.sympify(text))


def _exec_through_chr(target: pathlib.Path) -> str:
    """`exec(chr(111)+chr(112)+...)`: opens `target` for writing if evaluated, yet holds no
    quote, dot or dunder, so only the name whitelist stands in its way."""
    payload = f"open({str(target)!r}, 'w').close()"
    return "exec(" + "+".join(f"chr({ord(char)})" for char in payload) + ")"


# ------------------------------------------------------------------------ the pool


def test_a_normal_call_returns_its_value(pool):
    result = pool.call(math.sqrt, 16.0)
    assert (result.ok, result.value, result.error, result.kind) == (True, 4.0, None, "ok")


def test_an_exception_in_fn_is_an_error_and_the_worker_stays(pool):
    replaced_before = pool.stats.workers_replaced
    result = pool.call(math.sqrt, -1.0)
    assert (result.ok, result.kind) == (False, "error")
    assert result.error == "ValueError: math domain error"
    exited = pool.call(sys.exit, 3)  # SystemExit is fn's error too, not the worker's end
    assert (exited.kind, exited.error) == ("error", "SystemExit: 3")
    assert pool.stats.workers_replaced == replaced_before


def test_fn_runs_in_another_process(pool, tmp_path):
    target = tmp_path / "written-by-worker.txt"
    result = pool.call(_write_pid, str(target))
    assert result.kind == "ok"
    worker_pid = int(target.read_text())
    assert worker_pid != os.getpid()
    assert pool.call(os.getpid).value != os.getpid()


def test_a_result_that_is_not_plain_data_is_an_error(pool):
    # The parent only unpickles plain data; the worker says so instead of being replaced.
    replaced_before = pool.stats.workers_replaced
    result = pool.call(pathlib.PurePosixPath, "a/b")
    assert result.kind == "error"
    assert "not plain data" in result.error
    assert pool.stats.workers_replaced == replaced_before


SET_OF_RANGE = b"cbuiltins\nset\n(cbuiltins\nrange\n(I0\nI10000000000\ntRtR."
"""a 53-byte pickle that asks the reader to build set(range(10**10)) (protocol 0 globals)"""


def test_a_result_cannot_make_the_parent_build_a_container_from_a_call():
    import pickle

    from rlve.envs.gym.sandbox import _load_plain_data

    assert len(SET_OF_RANGE) == 53
    with pytest.raises(pickle.UnpicklingError, match="builtins.set is not plain data"):
        _load_plain_data(SET_OF_RANGE)
    # plain sets still arrive, as the item-by-item opcodes of today's protocols
    data = {"s": {1, 2}, "f": frozenset({"a"}), "c": complex(1, 2)}
    assert _load_plain_data(pickle.dumps(("ok", data))) == ("ok", data)


def _large_text(megabytes: int) -> str:
    return "x" * (megabytes * 1024 * 1024)


def test_an_oversized_result_is_a_crash_and_the_worker_is_replaced(pool):
    replaced = pool.stats.workers_replaced
    result = pool.call(_large_text, 17)
    assert result.kind == "crash" and "over 16777216 bytes" in result.error
    assert pool.stats.workers_replaced == replaced + 1
    assert pool.call(_large_text, 1).value == _large_text(1)  # under the cap


def test_an_unpicklable_function_is_an_error(pool):
    result = pool.call(lambda: 1)
    assert result.kind == "error"
    assert "cannot send the call" in result.error


def test_calls_from_several_threads(pool):
    with ThreadPoolExecutor(max_workers=4) as threads:
        results = list(threads.map(lambda k: pool.call(pow, 2, k), range(8)))
    assert [r.value for r in results] == [1, 2, 4, 8, 16, 32, 64, 128]


async def test_acall(pool):
    results = await asyncio.gather(pool.acall(pow, 3, 2), pool.acall(pow, 2, 3))
    assert [r.value for r in results] == [9, 8]


def test_a_hung_call_times_out_and_the_worker_is_replaced():
    with VerifierPool(num_workers=1, timeout_s=1.0) as pool:
        result = pool.call(time.sleep, 3600)
        assert (result.ok, result.kind) == (False, "timeout")
        assert pool.call(math.sqrt, 9.0).value == 3.0
        stats = pool.stats
        assert (stats.calls, stats.timeouts, stats.workers_replaced) == (2, 1, 1)


def test_a_call_over_the_memory_limit_crashes_and_the_pool_goes_on():
    with VerifierPool(num_workers=1, timeout_s=60.0, memory_limit_mb=256) as pool:
        result = pool.call(bytearray, 4 * 1024**3)  # 4 GB
        assert (result.ok, result.kind) == (False, "crash")
        assert "MemoryError" in result.error
        assert pool.call(math.sqrt, 9.0).value == 3.0
        assert (pool.stats.crashes, pool.stats.workers_replaced) == (1, 1)


def test_a_worker_that_exits_is_a_crash_and_is_replaced():
    with VerifierPool(num_workers=1, timeout_s=60.0) as pool:
        result = pool.call(os._exit, 1)
        assert (result.ok, result.kind) == (False, "crash")
        assert pool.call(math.sqrt, 9.0).value == 3.0
        assert (pool.stats.crashes, pool.stats.workers_replaced) == (1, 1)


def test_a_closed_pool_refuses_calls():
    pool = VerifierPool(num_workers=1)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.call(math.sqrt, 4.0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"num_workers": 0}, "num_workers"), ({"timeout_s": 0}, "timeout_s")],
)
def test_bad_settings_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        VerifierPool(**kwargs)


# ------------------------------------------------------------------------ the screen

HOSTILE = {
    "dunder import": "__import__('os').system('touch /tmp/pwned')",
    "subclass walk": "().__class__.__bases__[0].__subclasses__()",
    "exec": 'exec("import os")',
    "lambda": "lambda: 1",
    "1 MB": "1" * 2**20,
    "deep brackets": "(" * 1000 + "1" + ")" * 1000,
}


@pytest.mark.parametrize("name", HOSTILE)
def test_screen_rejects_hostile_text(name):
    with pytest.raises(UnsafeExpression):
        screen_expression(HOSTILE[name])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("__import__('os')", "double underscore"),
        ('exec("1")', "quote"),
        ("exec(x)", "name 'exec' is not allowed"),
        ("lambda x: x", "colon"),
        ("x if y else z", "keyword 'if'"),
        ("x.subs(x, 2)", "attribute access"),
        ("1 << 99999", "operator '<<'"),
        ("x; y", "semicolon"),
        ("x \\\n+ 1", "backslash"),
        ("\uff45\uff58\uff45\uff43(x)", "U+FF45"),  # fullwidth 'exec', which Python reads as exec
        ("1" * 2001, "2001 characters long"),
        ("(" * 51 + "1" + ")" * 51, "deeper than the limit of 50"),
        ("(x + 1", "never closed"),
    ],
)
def test_screen_says_why(text, reason):
    with pytest.raises(UnsafeExpression, match=re.escape(reason)):
        screen_expression(text)


@pytest.mark.parametrize("text", ["2*x + sqrt(3)", "(1+2)*3", "-7/2", "x**2 - 1", " 5! "])
def test_screen_accepts_arithmetic(text):
    assert screen_expression(text) == text.strip()


def test_screen_limits_are_settable():
    assert screen_expression("foo(x)", allowed_names={"foo", "x"}) == "foo(x)"
    assert screen_expression("((1))", max_depth=2) == "((1))"
    with pytest.raises(UnsafeExpression, match="deeper"):
        screen_expression("((1))", max_depth=1)
    with pytest.raises(UnsafeExpression, match="limit is 3"):
        screen_expression("1234", max_length=3)


def test_unscreened_sympy_runs_the_payload(pool, tmp_path):
    """The control for the test below: sympy really evaluates such text (in a worker here)."""
    pytest.importorskip("sympy", reason="sympy is not installed")
    target = tmp_path / f"pwned-{uuid.uuid4().hex}"
    result = pool.call(_sympify_unscreened, _exec_through_chr(target))
    assert result.kind == "ok"
    assert target.exists()


def test_screened_hostile_text_never_reaches_sympy(pool, tmp_path):
    pytest.importorskip("sympy", reason="sympy is not installed")
    target = tmp_path / f"pwned-{uuid.uuid4().hex}"
    hostile = [
        f"__import__('os').system('touch {target}')",
        _exec_through_chr(target),
        *HOSTILE.values(),
    ]
    for text in hostile:
        result = pool.call(_screen_then_sympify, text)
        assert result.kind == "ok"
        assert result.value.startswith("rejected: ")
    assert not target.exists()
    assert pool.call(_screen_then_sympify, "2*x + sqrt(3)").value == "2*x + sqrt(3)"
    assert pool.call(_screen_then_sympify, "x**2 - 1").value == "x**2 - 1"
