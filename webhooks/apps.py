from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"
    # The dispatcher starts in loci/worker_receivers.py, which only a worker imports.
