from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.contrib import admin

        from tenants import sign_in  # registers the failed sign-in counter
        from common import llm_usage
        from tenants import llm_usage as ledger

        llm_usage.register_ledger(ledger)  # the chat model's tokens are counted per tenant in LlmUsage

        admin.site.login_form = sign_in.AdminSignInForm
