from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib import admin

        from tenants import schema  # noqa: F401  registers the OpenAPI auth extension
        from tenants import sign_in  # registers the failed sign-in counter

        admin.site.login_form = sign_in.AdminSignInForm
