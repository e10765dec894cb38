from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here: the dispatcher uses the models, which exist only once the registry is ready.
        from celery import signals

        from webhooks.dispatcher import start_dispatcher_in_worker

        signals.worker_ready.connect(start_dispatcher_in_worker, dispatch_uid="webhooks.start_dispatcher")
