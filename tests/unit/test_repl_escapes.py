"""Escape attempts against the Python REPL, each made after switching the audit hook off from
inside the cell (it is reachable from Python, so it is not the boundary): the kernel's
confinement alone must hold. Nothing appears outside the working folder, nothing outside can be
read or signalled, and every attempt ends with its episode with nothing left running."""

from __future__ import annotations

import os

import pytest
from test_python_repl import ROWS, outputs, play, py, scripted, workers

from rlve.envs.repl import PythonREPLEnv, REPLLimits
from rlve.envs.repl.confine import landlock_abi
from rlve.envs.repl.process import namespaces_prefix

NEEDS_LANDLOCK = {"write_outside", "rename_outside", "link_outside", "write_through_a_symlink",
                  "dir_fd_outside", "relative_path_up", "pth_in_the_venv", "read_a_secret_file",
                  "read_the_parents_environment", "proc_write", "dev_shm"}  # fmt: skip
"""attempts only Landlock stops (where the kernel lacks it, the worker says so in its metrics)"""

HOOK_OFF = """
import gc, __main__
__main__.REFUSED_EVENTS.clear()
for f in gc.get_objects():
    if getattr(f, "__name__", None) == "hook" and getattr(f, "__closure__", None):
        for cell in f.__closure__:
            if callable(cell.cell_contents):
                cell.cell_contents = lambda *args, **kwargs: True
import ctypes, os, signal, socket, subprocess, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
"""
"""switches the audit hook off: no refused events, every path allowed"""

ATTEMPTS = {
    "hook_is_off": ("subprocess.Popen", "Out[1]:\n=> <class 'subprocess.Popen'>"),
    "subprocess": ("subprocess.run(['touch', OUT + '/by_subprocess'])", "PermissionError"),
    "detached_process": ("subprocess.Popen(['sleep', '60'], start_new_session=True)",
                         "PermissionError"),
    "fork": ("os.fork()", "PermissionError"),
    "fork_bomb": ("while True:\n    os.fork()", "PermissionError"),
    "fork_by_ctypes": ("print(libc.fork(), ctypes.get_errno())", "-1 1"),
    "exec_by_ctypes": ("print(libc.execv(b'/bin/sh', None), ctypes.get_errno())", "-1 1"),
    "unshare_by_ctypes": ("print(libc.unshare(0x10000000), ctypes.get_errno())", "-1 1"),
    "ptrace_the_parent": ("print(libc.ptrace(16, os.getppid(), 0, 0), ctypes.get_errno())", "-1 1"),
    "write_outside": ("open(OUT + '/written', 'w').write('x')", "PermissionError"),
    "rename_outside": ("open('f', 'w').write('x')\nos.rename('f', OUT + '/renamed')", "Error"),
    "link_outside": ("open('f', 'w').write('x')\nos.link('f', OUT + '/linked')", "Error"),
    "write_through_a_symlink": ("os.symlink(OUT + '/via_link', 'link')\nopen('link', 'w')",
                                "PermissionError"),
    "dir_fd_outside": ("fd = os.open(OUT, os.O_RDONLY)\nos.open('x', os.O_CREAT | os.O_WRONLY, "
                       "dir_fd=fd)", "PermissionError"),
    "relative_path_up": ("open('../../' + OUT + '/up', 'w')", "Error"),
    "pth_in_the_venv": ("import site\nopen(site.getsitepackages()[0] + '/evil.pth', 'w')",
                        "PermissionError"),
    "read_a_secret_file": ("open(OUT + '/secret.txt').read()", "PermissionError"),
    "read_the_parents_environment": ("open(f'/proc/{PARENT}/environ').read()", "Error"),
    "proc_write": ("open('/proc/self/oom_score_adj', 'w').write('-1000')", "PermissionError"),
    "signal_the_parent": ("os.kill(os.getppid(), signal.SIGKILL)", "PermissionError"),
    "signal_the_test_process": ("os.kill(PARENT, signal.SIGKILL)", "Error"),
    "network": ("socket.create_connection(('127.0.0.1', 9), timeout=2)", "Error"),
    "signal_the_process_group": ("os.killpg(os.getpgid(0), signal.SIGKILL)", "PermissionError"),
    "raise_the_cpu_limit": ("import resource\nresource.setrlimit(resource.RLIMIT_CPU, (-1, -1))",
                            "Error"),
    "sysv_shared_memory": ("print(libc.shmget(0, 100 * 1024**2, 0o1600), ctypes.get_errno())",
                           "-1 1"),
    "sysv_message_queue": ("print(libc.msgget(0, 0o1600), ctypes.get_errno())", "-1 1"),
    "sysv_semaphores": ("print(libc.semget(0, 1, 0o1600), ctypes.get_errno())", "-1 1"),
    "memory_file": ("os.memfd_create('held')", "PermissionError"),
    "memory_file_by_ctypes": ("print(libc.memfd_create(b'held', 0), ctypes.get_errno())",
                              "-1 1"),
    "dev_shm": ("open('/dev/shm/held', 'wb').write(b'x' * 10**6)", "Error"),
}  # fmt: skip
"""name -> (cell after HOOK_OFF, text its output contains)"""


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("sk-not-for-models")
    return folder


def attempt(code: str, outside, **limits):
    env = PythonREPLEnv(ROWS, limits=REPLLimits(**limits))
    setup = f"OUT = {str(outside)!r}\nPARENT = {os.getpid()}\n" + HOOK_OFF
    (t,) = play(env, scripted(py(setup + code), py("'alive'"), "done"))
    return t


@pytest.mark.parametrize("name", sorted(ATTEMPTS))
def test_an_escape_attempt_with_the_audit_hook_off_fails(name, outside):
    if name in NEEDS_LANDLOCK and not landlock_abi():
        pytest.skip("this kernel has no Landlock: files are held by the audit hook only")
    code, expected = ATTEMPTS[name]
    t = attempt(code, outside)
    assert expected in outputs(t)[0], outputs(t)[0]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert "sk-not-for-models" not in outputs(t)[0]
    assert workers() == []


def test_the_worker_reports_every_mechanism_the_kernel_granted(outside):
    t = attempt("1", outside)
    granted = {k: v for k, v in t.metrics.items() if k.startswith("repl/isolation_")}
    assert granted["repl/isolation_seccomp"] == 1.0
    assert granted["repl/isolation_landlock"] == landlock_abi()
    if namespaces_prefix():  # where the kernel allows namespaces (not every container does)
        assert granted["repl/isolation_namespaces"] == granted["repl/isolation_tmpfs"] == 1.0


@pytest.mark.skipif(not namespaces_prefix(), reason="no namespaces here: no tmpfs quota")
@pytest.mark.parametrize(
    ("code", "limits"),
    [
        ("for i in range(100):\n    open(f'f{i}', 'wb').write(b'x' * 2**20)", {"disk_mb": 8}),
        ("for i in range(1000):\n    open(f'f{i}', 'w')", {"max_files": 50}),
    ],
)
def test_the_working_folder_holds_its_quota(code, limits, outside):
    t = attempt(code, outside, **limits)
    assert "No space left on device" in outputs(t)[0]


def test_threads_and_ignored_cpu_signals_end_with_the_episode(outside):
    spin = ("signal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
            "def writer():\n    i = 0\n    while True:\n        i += 1\n"
            "        open(f'w{i % 10}', 'w').write('x')\n"
            "threading.Thread(target=writer, daemon=True).start()\n"
            "while True:\n    pass")  # fmt: skip
    t = attempt(spin, outside, cpu_s=1, wall_s=4)
    assert t.stop_reason == "repl_wall_time"
    assert workers() == []
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
