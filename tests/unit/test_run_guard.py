"""One run per output directory; the processes a run starts end with it, however it ends."""

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from rlve.reliability.processes import RUN_DIR_VAR, RUN_ID_VAR, run_processes
from rlve.reliability.run_guard import RunDirInUse, run_guard


def gone(pid: int, within_s: float = 30.0) -> bool:
    """Whether `pid` has exited (or is a zombie) within `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def visible(pid: int, run_dir, within_s: float = 30.0) -> bool:
    """Whether `pid` shows the marks of `run_dir` in /proc within `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if pid in [p.pid for p in run_processes(run_dir=run_dir)]:
            return True
        time.sleep(0.01)
    return False


def test_a_second_run_on_the_same_directory_is_refused_naming_the_first(tmp_path):
    with run_guard(tmp_path):
        with pytest.raises(RunDirInUse, match=f"in use by another live run \\(pid {os.getpid()}"):
            with run_guard(tmp_path):
                pass
    with run_guard(tmp_path):  # the lock went with the first run
        pass


def test_processes_started_inside_are_marked_and_the_marks_do_not_leak(tmp_path):
    with run_guard(tmp_path):
        child = subprocess.Popen(["sleep", "30"])
        assert visible(child.pid, tmp_path)  # the exec window: see the test below
        found = run_processes(run_dir=tmp_path)
        child.kill()
        child.wait()
    assert [p.pid for p in found] == [child.pid]  # the watchdog is not marked, this process not
    assert "sleep 30" in found[0].command
    assert RUN_DIR_VAR not in os.environ and RUN_ID_VAR not in os.environ


def test_leftovers_of_an_earlier_run_are_ended_and_named(tmp_path, caplog):
    marks = {RUN_DIR_VAR: str(tmp_path.resolve()), RUN_ID_VAR: "earlier"}
    leftover = subprocess.Popen(["sleep", "600"], env={**os.environ, **marks})
    # Popen returns once exec has begun; /proc/<pid>/environ shows the new environment a
    # moment later (a window CI hit under load), and the guard only sees what /proc shows.
    assert visible(leftover.pid, tmp_path)
    with caplog.at_level(logging.WARNING), run_guard(tmp_path):
        assert leftover.poll() == -signal.SIGTERM
    assert f"pid {leftover.pid} (sleep 600)" in caplog.text
    assert "1 processes of an earlier run" in caplog.text


def test_the_watchdog_ends_the_run_s_processes_when_the_main_process_is_killed(tmp_path):
    main = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent("""
            import subprocess, sys, time
            from rlve.reliability.run_guard import run_guard
            with run_guard(sys.argv[1]):
                grandchild = subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600"])
                print(grandchild.pid, flush=True)
                time.sleep(600)
        """), str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    first = int(main.stdout.readline())
    assert visible(first, tmp_path)
    started = [p.pid for p in run_processes(run_dir=tmp_path)]
    deadline = time.monotonic() + 30
    while len(started) < 3 and time.monotonic() < deadline:  # the shell starts its second sleep
        time.sleep(0.05)
        started = [p.pid for p in run_processes(run_dir=tmp_path)]
    assert first in started and len(started) == 3  # sh and its two sleeps
    main.kill()
    main.wait()
    assert all(gone(pid) for pid in started)
    assert run_processes(run_dir=tmp_path) == []
