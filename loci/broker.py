"""The embedded broker: kombu's filesystem transport, with message files that appear whole and are taken once.

kombu 5.7 writes a message by opening its final name in the queue folder and then writing into it.
A worker that lists the folder in between takes the still-empty file, fails to decode it, and the
message is gone: 220 of 3,000 messages published while one consumer polled every millisecond
(tests/test_broker.py). A worker polling every second rarely hits the gap, one polling every 0.1 s
lost documents of the browser tests. Here a message is written under a name no queue reads
(`.<uuid>.tmp`) and renamed into place, which is atomic within one folder.

kombu also moves a taken file to the system's temporary folder (or `processed_folder`) before it
reads it; across file systems that move is a copy, which two workers can both make of one file. Here
it is a rename into `processed_folder`, beside the queue: only one worker's rename succeeds.

The exchange's table of bindings (`control_folder`) is created by kombu with open("wb") before its
lock is taken: a process that reads it in between (a worker and the web process start together)
reads an empty file. Here the file first appears whole, as an empty table, by a link that only one
process wins; kombu's locked update of an existing file does the rest. Within one process kombu
records a binding in its shared state before it writes the file, so a second thread that publishes
in between finds the binding "known", reads no route and drops the message: a bind here holds a
process-wide lock until the file is written.

kombu's loop sleeps `polling_interval` after every empty look, also when the look was not made because
the worker's pool is busy (its prefetch is full): a worker that finished a document then waited out
the rest of that sleep before it took the next one. Fifty small files took one a second whatever
each took (tests/test_console_browser.py, 57 s). A worker whose pool is busy now checks every
BUSY_POLL_SECONDS whether it may take a message (a count in memory) and looks at the folder as soon
as it may; the folder is still listed at most once per `polling_interval` otherwise.
"""

import os
import socket
import threading
import uuid
from queue import Empty
from time import monotonic, sleep

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads


_BINDING = threading.Lock()
# How often a worker whose pool is busy checks whether it may take the next message (its unacknowledged
# count against its prefetch limit, in memory): it takes the next one within this of finishing the last.
BUSY_POLL_SECONDS = 0.02


class Channel(filesystem.Channel):
    def queue_bind(self, *args, **kwargs):
        with _BINDING:
            return super().queue_bind(*args, **kwargs)

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        table = self._exchange_file(exchange)
        if not table.exists():
            self.control_folder.mkdir(parents=True, exist_ok=True)
            partial = self.control_folder / f".{uuid.uuid4()}.tmp"
            partial.write_bytes(b"[]")
            try:
                os.link(partial, table)
            except FileExistsError:  # another process created it first
                pass
            finally:
                partial.unlink()
        super()._queue_bind(exchange, routing_key, pattern, queue)

    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"  # kombu's: sorted by time
        partial = os.path.join(self.data_folder_out, f".{uuid.uuid4()}.tmp")
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.rename(partial, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {name!r} to directory") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue
            taken = os.path.join(self.processed_folder, name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), taken)
            except OSError:  # another worker took it first
                continue
            try:
                with open(taken, "rb") as f:
                    payload = f.read()
                if not self.store_processed:
                    os.remove(taken)
            except OSError as exc:
                raise ChannelError(f"Cannot read file {taken!r} from queue.") from exc
            return loads(bytes_to_str(payload))
        raise Empty()


class Transport(filesystem.Transport):
    Channel = Channel

    def drain_events(self, connection, timeout=None):
        """kombu's loop (virtual.Transport.drain_events), except that a busy pool's sleep ends when it is free."""
        time_start = monotonic()
        while True:
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                if timeout is not None and monotonic() - time_start >= timeout:
                    raise socket.timeout() from None
                if self.polling_interval is None:
                    continue
                interval = min(self.polling_interval, timeout) if timeout else self.polling_interval
                if not self._pool_busy():
                    sleep(interval)
                    continue
                # Look again as soon as the pool may take a message, or after `interval` as before: the
                # folder is still listed at most once per interval while a long task runs.
                wake = monotonic() + interval
                while self._pool_busy() and monotonic() < wake:
                    sleep(BUSY_POLL_SECONDS)

    def _pool_busy(self) -> bool:
        """A consuming channel is at its prefetch limit (unacknowledged messages): nothing may be taken."""
        return any(channel._consumers and not channel.qos.can_consume() for channel in self.channels)
