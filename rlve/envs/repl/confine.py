"""Kernel-enforced confinement of a REPL worker, applied by the worker to itself before its
first cell. Nothing a cell does can lift it: the kernel holds it, not Python.

- Landlock: reads only beneath the Python installation, its import paths and a few devices;
  reads and writes beneath the working folder; nothing else (API keys in the home folder, other
  processes' /proc files, a `.pth` in the venv). Signals to processes outside the worker are
  refused (Landlock ABI 6).
- seccomp: no new processes (fork, vfork, clone without CLONE_THREAD, exec), no sockets, no
  signals to other processes, no ptrace, mount, namespace, module, keyring, bpf or io_uring
  calls; they fail with EPERM.
- rlimits: address space, file size, open files.

The worker is also started in new user, mount, PID, network, IPC and UTS namespaces (process.py,
with `unshare`): when the namespace's PID 1 (the worker's reaper) ends, the kernel ends every
process in it, and the working folder is a tmpfs of `disk_mb` holding at most `max_files` files.
The worker reports what the kernel granted (the `repl/isolation_*` metrics); where it refuses a
mechanism, the run says so at start and the worker runs with the rest.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import struct

_LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2

# ---------------------------------------------------------------- Landlock

SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
TRUNCATE, IOCTL_DEV = 1 << 14, 1 << 15
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""the rights a rule on a file (not a folder) may grant"""


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 without Landlock."""
    version = _LIBC.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(version, 0)


def handled_fs_rights(abi: int) -> int:
    """Every filesystem right the kernel of `abi` knows (v1: 13, v2 adds refer, v3 truncate,
    v5 device ioctl)."""
    return (1 << {1: 13, 2: 14, 3: 15, 4: 15}.get(abi, 16)) - 1


def restrict_paths(read_only: list[str], read_write: list[str]) -> int:
    """Landlock this process: only what lies beneath `read_only` (read, execute) and
    `read_write` (everything) is reachable. Returns the ABI applied, 0 when unavailable."""
    abi = landlock_abi()
    if abi == 0:
        return 0
    handled = handled_fs_rights(abi)
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("<QQQ", handled, 0, scoped)
    ruleset = _LIBC.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, len(attr) if abi >= 6 else 8, 0)
    if ruleset < 0:
        return 0
    try:
        for paths, rights in ((read_only, EXECUTE | READ_FILE | READ_DIR), (read_write, handled)):
            for path in paths:
                _allow_beneath(ruleset, path, rights & handled)
        if _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return 0
        if _LIBC.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return 0
    finally:
        os.close(ruleset)
    return abi


def _allow_beneath(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:  # a path that does not exist here: nothing to allow
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = struct.pack("<Qi", rights, fd)  # struct landlock_path_beneath_attr is packed
        if _LIBC.syscall(SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0):
            raise OSError(ctypes.get_errno(), f"Landlock refused a rule for {path}")
    finally:
        os.close(fd)


# ---------------------------------------------------------------- seccomp

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
CLONE, CLONE3 = "clone", "clone3"
SYSCALLS = {
    "x86_64": {
        "clone": 56, "clone3": 435, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165,
        "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
        "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
        "keyctl": 250, "add_key": 248, "request_key": 249, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "open_by_handle_at": 304,
        "name_to_handle_at": 303, "mknod": 133, "mknodat": 259, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163,
        "syslog": 103, "iopl": 172, "ioperm": 173, "socket": 41, "tkill": 200,
        "pidfd_send_signal": 424,
        "kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
        "shmget": 29, "shmat": 30, "semget": 64, "msgget": 68, "memfd_create": 319,
        "memfd_secret": 447,
    },
    "aarch64": {  # asm-generic numbers: no fork, vfork, mknod, iopl, ioperm
        "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "mount": 40, "umount2": 39,
        "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219, "add_key": 217,
        "request_key": 218, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "open_by_handle_at": 265, "name_to_handle_at": 264,
        "mknodat": 33, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "mount_setattr": 442, "reboot": 142, "swapon": 224,
        "swapoff": 225, "acct": 89, "syslog": 116, "socket": 198, "tkill": 130,
        "pidfd_send_signal": 424,
        "kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
        "shmget": 194, "shmat": 196, "semget": 190, "msgget": 186, "memfd_create": 279,
        "memfd_secret": 447,
    },
}  # fmt: skip
"""the calls a worker never makes: refused (clone only without CLONE_THREAD: threads stay;
the signal calls only towards another process: a cell may still signal itself). SysV shared
memory, semaphores and message queues, and memory files, hold memory outside RLIMIT_AS."""
SIGNAL_CALLS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
"""first argument: the process to signal"""
CLONE_THREAD = 0x00010000
X32_BIT = 0x40000000

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL_PROCESS = 0x7FFF0000, 0x80000000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16
"""offsets in struct seccomp_data (args[0]'s low half on a little-endian machine)"""


def seccomp_program(machine: str, own_pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF filter as (code, jump if true, jump if false, k) instructions."""
    eperm, enosys = _ERRNO | 1, _ERRNO | 38  # ENOSYS from clone3: glibc falls back to clone
    calls = SYSCALLS[machine]
    program = [(_LD_W_ABS, 0, 0, _ARCH), (_JEQ, 1, 0, AUDIT_ARCH[machine]),
               (_RET, 0, 0, _KILL_PROCESS), (_LD_W_ABS, 0, 0, _NR)]  # fmt: skip
    if machine == "x86_64":  # the x32 ABI's numbers would pass every check below
        program += [(_JGE, 0, 1, X32_BIT), (_RET, 0, 0, eperm)]
    program += [(_JEQ, 0, 1, calls[CLONE3]), (_RET, 0, 0, enosys)]
    # clone: allowed with CLONE_THREAD (a thread), refused otherwise (a process)
    program += [(_JEQ, 0, 4, calls[CLONE]), (_LD_W_ABS, 0, 0, _ARG0),
                (_JSET, 0, 1, CLONE_THREAD), (_RET, 0, 0, _ALLOW), (_RET, 0, 0, eperm),
                (_LD_W_ABS, 0, 0, _NR)]  # fmt: skip
    for name in SIGNAL_CALLS:  # allowed towards this process only
        program += [(_JEQ, 0, 4, calls[name]), (_LD_W_ABS, 0, 0, _ARG0), (_JEQ, 0, 1, own_pid),
                    (_RET, 0, 0, _ALLOW), (_RET, 0, 0, eperm), (_LD_W_ABS, 0, 0, _NR)]  # fmt: skip
    for name, number in calls.items():
        if name not in (CLONE, CLONE3, *SIGNAL_CALLS):
            program += [(_JEQ, 0, 1, number), (_RET, 0, 0, eperm)]
    return program + [(_RET, 0, 0, _ALLOW)]


def install_seccomp() -> bool:
    """Install the filter on this process (and every thread it starts). False where the
    machine's system calls are not known here or the kernel refuses."""
    machine = platform.machine()
    if machine not in SYSCALLS:
        return False
    program = seccomp_program(machine, os.getpid())
    filters = b"".join(struct.pack("<HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("<HxxxxxxQ", len(program), ctypes.addressof(buffer))
    if _LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return _LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fprog, 0, 0) == 0


# ---------------------------------------------------------------- the working folder

MS_NOSUID, MS_NODEV = 2, 4


def mount_workdir(workdir: str, disk_mb: int, max_files: int) -> bool:
    """A private tmpfs of `disk_mb` and `max_files` inodes over `workdir`: the worker's whole
    disk. Needs the mount namespace process.py starts it in; False where mounting fails."""
    options = f"size={disk_mb}m,nr_inodes={max_files},mode=700".encode()
    flags = MS_NOSUID | MS_NODEV
    if _LIBC.mount(b"tmpfs", workdir.encode(), b"tmpfs", flags, options) != 0:
        return False
    os.chdir(workdir)  # into the new mount
    return True


def limit_resources(memory_mb: int, max_file_bytes: int, max_open_files: int) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max_open_files, max_open_files))
