"""The embedded Milvus Lite server: one process per data file, reached only by its own installation.

Milvus Lite locks its data file to a single process, so no Loci process opens the file itself.
`ensure_server` starts `python -m retrieval.milvus_lite serve` (once: a file lock serialises
concurrent starters) and every process then connects with a MilvusClient as it would to a cluster.

Identity. Milvus Lite has no authentication and answers anyone on its port, so a port that answers
proves nothing: two installations on one port once shared a server, and deleting a document in one
deleted the other's vectors. `serve` records {path, port, pid, milvus_pid} in `.<db>.server.json`
next to the data file, and a client trusts the record only when /proc shows that the milvus binary
it names is a child of that serve process, was started over this very file on that port, and holds
the socket listening there. With no port configured a free one is picked (and reused next time if
it is still free); a configured port held by anything else is an error naming both files.

Lifetime. Every process that uses the server registers in `.<db>.users/` (pid and start time, so a
reused pid does not count). The server stops when none of them is alive any more, and a process
that exits normally stops it at once if it was the last. So a management command that started it
stops it at exit, `up` stops it after its children, a SIGKILLed user leaves it running for about a
second, and the milvus binary dies with its serve process (PR_SET_PDEATHSIG) even if that is killed.
The identity and lifetime checks read /proc, so the embedded server needs Linux.
"""

from retrieval.milvus_lite.client import ensure_server, release, stop_server
from retrieval.milvus_lite.processes import HOST

__all__ = ["HOST", "ensure_server", "release", "stop_server"]
