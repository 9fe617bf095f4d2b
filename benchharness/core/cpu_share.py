"""Torch's CPU threads sized to the cores other processes leave free.

torch's OpenMP threads work in lock step: every parallel region ends in a barrier, where a thread
that finished first spins while waiting for the others. Beside another busy process, one of our
threads is descheduled now and then, and its partner spins through the rest of that time slice;
on a 2-core machine shared with one 2-thread job the transfer classifiers, whose regions are tiny,
ran about 20x slower instead of the fair 2x. A passive OpenMP wait policy removes the spinning but
makes every wake-up a futex call, which more than doubled the idle time; so the harness keeps
torch's threads and gives cores back when it sees that someone else runs on them.

What it sees is instantaneous: the kernel's count of runnable threads (``/proc/loadavg``) minus
this process's own runnable ones (``/proc/self/task/*/stat``). Reading both costs about 0.1 ms,
so loops check at every epoch or batch. Off Linux nothing is measured and the threads stay as
they are.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

_LOADAVG = Path("/proc/loadavg")
_TASKS = Path("/proc/self/task")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), which a container may set below the count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def others_runnable() -> int | None:
    """Threads of other processes that are running or waiting for a CPU now; None off Linux."""
    try:
        total = int(_LOADAVG.read_text().split()[3].split("/")[0])
        own = 0
        for stat in _TASKS.iterdir():
            try:
                # the state follows the command name, which is in parentheses and may hold spaces
                own += (stat / "stat").read_text().rpartition(")")[2].split()[0] == "R"
            except (OSError, IndexError):
                continue  # a thread that ended while we looked
    except (OSError, ValueError, IndexError):
        return None
    return max(0, total - own)


def free_cpus() -> int | None:
    """Usable CPUs that no other process is using now (at least 1); None when it cannot be seen."""
    others = others_runnable()
    if others is None:
        return None
    return max(1, usable_cpus() - others)


class ThreadShare:
    """Keeps torch's intra-op threads at ``min(wanted, free CPUs)``, re-checked at each ``adjust()``.

    ``wanted`` is torch's thread count when the share is made (the user's or torch's default);
    leaving the ``with`` block restores it. Only CPU work is touched: on a GPU ``adjust`` does
    nothing."""

    def __init__(self, device: object = "cpu") -> None:
        import torch

        self._torch = torch
        self.active = getattr(device, "type", str(device).split(":")[0]) == "cpu"
        self.wanted = torch.get_num_threads()
        self.current = self.wanted

    def adjust(self) -> int:
        """Set and return the thread count for the next stretch of work."""
        if not self.active or self.wanted == 1:
            return self.current
        free = free_cpus()
        target = self.wanted if free is None else min(self.wanted, free)
        if target != self.current:
            self._torch.set_num_threads(target)
            self.current = target
        return target

    def restore(self) -> None:
        if self.current != self.wanted:
            self._torch.set_num_threads(self.wanted)
            self.current = self.wanted


@contextlib.contextmanager
def shared_threads(device: object = "cpu") -> Iterator[ThreadShare]:
    """A ``ThreadShare`` adjusted once on entry and restored on exit."""
    share = ThreadShare(device)
    share.adjust()
    try:
        yield share
    finally:
        share.restore()


@contextlib.contextmanager
def kept_threads() -> Iterator[None]:
    """torch's thread count as it was on entry, again on exit.

    Training sets the count its config asks for (``--threads``); run inside a library call
    (``evaluate("paser", ...)`` trains the recipe on demand) that count must not outlive the call.
    Usable as a decorator (``@kept_threads()``)."""
    import torch

    before = torch.get_num_threads()
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
