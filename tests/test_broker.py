"""The embedded broker (a folder of message files) delivers every message once, however often workers poll."""

import threading
import time
import uuid

from kombu import Connection

MESSAGES = 3000
TRANSPORT = "loci.broker:Transport"


def _options(tmp_path) -> dict:
    folders = {key: tmp_path / key for key in ("queue", "processed", "control")}
    for folder in folders.values():
        folder.mkdir()
    # The control folder (the exchange's bindings) is kombu's ./control by default: the working directory,
    # shared with every other test process.
    return {"data_folder_in": str(folders["queue"]), "data_folder_out": str(folders["queue"]),
            "processed_folder": str(folders["processed"]), "control_folder": str(folders["control"]),
            "store_processed": False, "polling_interval": 0.001}


def test_messages_published_while_two_workers_poll_arrive_whole_and_once(tmp_path):
    # kombu's own transport lost 220 of 3,000 here: a consumer took a file before its writer wrote it.
    options = _options(tmp_path)
    # kombu keeps the bindings it has declared in one state per process: a queue name of its own, so a
    # binding an earlier test declared (in another control folder) is not taken as this one's.
    name = f"stress-{uuid.uuid4().hex}"
    received, errors = [], []
    published = threading.Event()

    def consume():
        with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as conn:
            queue = conn.SimpleQueue(name)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (published.is_set() and queue.qsize() == 0):
                try:
                    message = queue.get(timeout=0.2)
                except queue.Empty:
                    continue
                except Exception as exc:  # a message that could not be decoded is a lost message
                    errors.append(repr(exc))
                    continue
                received.append(message.payload["n"])
                message.ack()

    consumers = [threading.Thread(target=consume) for _ in range(2)]
    for consumer in consumers:
        consumer.start()
    with Connection("filesystem://", transport=TRANSPORT, transport_options=options) as conn:
        queue = conn.SimpleQueue(name)
        for n in range(MESSAGES):
            queue.put({"n": n, "body": "x" * 2000})
    published.set()
    for consumer in consumers:
        consumer.join(timeout=90)

    assert errors == []
    assert sorted(received) == list(range(MESSAGES))  # none lost, none delivered twice
    assert list((tmp_path / "queue").iterdir()) == [] and list((tmp_path / "processed").iterdir()) == []


def test_the_app_uses_it_for_the_filesystem_broker_only(settings):
    from loci.celery import app

    assert settings.CELERY_BROKER_URL == "filesystem://"
    assert type(app.connection_for_write().transport).__module__ == "loci.broker"
