"""What only a Celery worker runs as it starts and stops: the sweepers and the webhook dispatcher.

The worker imports this module when it boots (CELERY_IMPORTS in settings), before `worker_ready`, so
the web server, the `manage.py` commands and the shells do not load the sweepers, and through them
the whole ingestion pipeline, only to connect receivers they never fire. `manage.py up` starts the
same threads in its own process itself.
"""

from celery import signals

from conversations.job_sweeper import start_job_sweeper, stop_job_sweeper
from ingest.sweeper import start_sweeper_in_worker, stop_sweeper_in_worker
from webhooks.dispatcher import start_dispatcher_in_worker

# In the worker's main process: a document stage or an extraction job a killed worker held is sent
# again by the next sweep; webhook deliveries go out from here.
signals.worker_ready.connect(start_sweeper_in_worker, dispatch_uid="ingest.start_sweeper")
signals.worker_shutdown.connect(stop_sweeper_in_worker, dispatch_uid="ingest.stop_sweeper")
signals.worker_ready.connect(start_job_sweeper, dispatch_uid="conversations.start_job_sweeper")
signals.worker_shutdown.connect(stop_job_sweeper, dispatch_uid="conversations.stop_job_sweeper")
signals.worker_ready.connect(start_dispatcher_in_worker, dispatch_uid="webhooks.start_dispatcher")
