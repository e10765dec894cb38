from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # The sweeper starts in loci/worker_receivers.py, which only a worker imports.
        from celery import signals

        from ingest import worker_liveness

        worker_liveness.connect(signals)  # each worker's heartbeat file, and the solo pool's soft time limit
