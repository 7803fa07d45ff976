"""Keeping a secret this process holds out of reach of the processes it starts (issue 21, ADR-0026).

``crucible worker`` holds its round's token while it runs an agent that, in a restricted pod, has no
sandbox: bubblewrap cannot create namespaces there. Scrubbing the children's environment is not
enough: an agent running as the same user read the token from ``/proc/<worker>/environ``, which shows
the environment the process *started* with, whatever it later removed. Two measures close that:

- :func:`make_undumpable`: ``prctl(PR_SET_DUMPABLE, 0)``. The kernel then owns ``/proc/<pid>/`` of this
  process by root and refuses ``environ``, ``mem``, ``maps`` and ptrace to other processes of the same
  user (only ``CAP_SYS_PTRACE`` passes, which a restricted pod drops). Children get their own flag back
  at ``execve``; they never held the secret.
- :func:`wipe_environment_value`: the secret's bytes in the original environment block (what
  ``/proc/<pid>/environ`` reads) overwritten with NULs, so even a process that stays dumpable (where
  ``prctl`` is missing) shows nothing.

Linux only (ctypes on the C library); elsewhere both report that they could not act.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    libc.getenv.restype = ctypes.c_void_p
    libc.getenv.argtypes = [ctypes.c_char_p]
    libc.strlen.restype = ctypes.c_size_t
    libc.strlen.argtypes = [ctypes.c_void_p]
    return libc


def make_undumpable() -> bool:
    """Close this process's ``/proc/<pid>/environ`` and ``mem`` to other processes of its user; whether
    the kernel took it."""
    libc = _libc()
    if libc is None:
        return False
    return libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 and is_undumpable()


def is_undumpable() -> bool:
    """Whether this process is non-dumpable now."""
    libc = _libc()
    return libc is not None and libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


def wipe_environment_value(name: str) -> bool:
    """Overwrite the value of ``name`` in the C environment with NUL bytes where it lies (for a variable
    the process started with: the block ``/proc/<pid>/environ`` shows); whether there was one.

    Python's ``os.environ`` is a copy made at start, so this changes nothing Python reads; the caller
    removes the variable from ``os.environ`` as well (which unsets it for the C library too)."""
    libc = _libc()
    if libc is None:
        return False
    value = libc.getenv(name.encode())
    if not value:
        return False
    ctypes.memset(value, 0, libc.strlen(value))
    return True
