"""`python loci/die_with_parent.py PARENT_PID COMMAND…`: run COMMAND so that it dies with its parent.

`up` starts every child through this. It asks Linux for a parent-death signal (prctl
PR_SET_PDEATHSIG, kept across exec) and then becomes COMMAND, so a `kill -9` of `up` still stops
the web server and the workers: they used to live on, keep the port, and make the next `make run`
fail on it. If the parent died before the signal was armed, COMMAND never starts. Elsewhere than
Linux the command simply runs (and `up`'s stale-port check names what was left behind).

The signal is SIGTERM: the web server and a worker shut down as on Ctrl-C (a worker finishes its
task; a stage that dies anyway is taken over once its lease runs out). Linux sends it when the
*thread* that started the child exits, so `up` starts children only from its main thread.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def arm(parent_pid: int, sig: int = signal.SIGTERM) -> None:
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:  # the parent is already gone: the signal would never come
        sys.exit(f"{parent_pid} exited before its child started; not starting it")


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.exit("usage: python loci/die_with_parent.py PARENT_PID COMMAND…")
    arm(int(argv[1]))
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv)
