"""The core's tables take their app's name: ingest_document -> memory_document, and so on.

The models moved from ingest to memory (ingest 0003, memory 0001) with their tables kept as they
were; this renames them (and the memory-to-chunk link table) in place: no row is copied. PostgreSQL
renames them in the migration's transaction; SQLite (3.26 and later) updates the foreign keys that
name them. Tested both ways on both (tests/test_table_names.py).
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0004_history_kb_id'),
    ]

    operations = [
        migrations.RenameIndex(
            model_name='memory',
            new_name='memory_memo_tenant__344c48_idx',
            old_name='ingest_memo_tenant__1f2579_idx',
        ),
        migrations.AlterModelTable(
            name='chunk',
            table=None,
        ),
        migrations.AlterModelTable(
            name='document',
            table=None,
        ),
        migrations.AlterModelTable(
            name='memory',
            table=None,
        ),
        migrations.AlterModelTable(
            name='memoryhistory',
            table=None,
        ),
        migrations.AlterModelTable(
            name='message',
            table=None,
        ),
    ]
