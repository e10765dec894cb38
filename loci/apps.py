from django.apps import AppConfig


class LociConfig(AppConfig):
    name = "loci"
    verbose_name = "Loci"
