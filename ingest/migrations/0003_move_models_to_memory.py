"""The shared models moved to the core app `memory`: removed here from the migration state only.

Their tables stay as they are (`ingest_*`); memory/migrations/0001_initial.py takes them over in its
state. Memory goes first: it refers to the others.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("ingest", "0002_document_claim_token_retryable"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="Memory"),
                migrations.DeleteModel(name="MemoryHistory"),
                migrations.DeleteModel(name="Message"),
                migrations.DeleteModel(name="Chunk"),
                migrations.DeleteModel(name="Document"),
            ],
            database_operations=[],
        ),
    ]
