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
"""

import os
import uuid
from queue import Empty
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads


class Channel(filesystem.Channel):
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
