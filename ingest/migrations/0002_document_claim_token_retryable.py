import uuid

from django.db import migrations, models

RUNNING = ("parsing", "extracting", "indexing")


def claim_running_documents(apps, schema_editor):
    # A document caught mid-stage by the upgrade has no claim token. Without one it would read as
    # "stage finished, waiting for the next": give it an anonymous claim, so that once its lease is
    # over the sweeper runs its stage again instead of skipping it.
    Document = apps.get_model("ingest", "Document")
    for pk in Document.objects.filter(status__in=RUNNING).values_list("pk", flat=True):
        Document.objects.filter(pk=pk).update(claim_token=uuid.uuid4())


class Migration(migrations.Migration):
    dependencies = [("ingest", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="document",
            name="claim_token",
            field=models.UUIDField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="document",
            name="retryable",
            field=models.BooleanField(default=True, help_text="false when the failure is in the file itself"),
        ),
        migrations.RunPython(claim_running_documents, migrations.RunPython.noop),
    ]
