from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here: the sweeper uses the models, which exist only once the registry is ready.
        from celery import signals

        from ingest.sweeper import start_sweeper_in_worker, stop_sweeper_in_worker

        signals.worker_ready.connect(start_sweeper_in_worker, dispatch_uid="ingest.start_sweeper")
        signals.worker_shutdown.connect(stop_sweeper_in_worker, dispatch_uid="ingest.stop_sweeper")

        from ingest import worker_liveness

        worker_liveness.connect(signals)  # each worker's heartbeat file, and the solo pool's soft time limit
