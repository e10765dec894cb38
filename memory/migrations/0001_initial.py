"""The shared models, taken over from `ingest` with their tables (`ingest_*`) as they are.

State only: on a fresh database ingest/migrations/0001_initial.py has just created the tables; on
an existing one they hold its rows. The content types (and so the permissions granted on them, such
as `change_memory` for curators) move from the `ingest` label to `memory`.
"""

import django.db.models.deletion
import django.utils.timezone
import memory.models
import uuid
from django.db import migrations, models


MODELS = ["document", "chunk", "message", "memory", "memoryhistory"]


def move_content_types(apps, schema_editor, old="ingest", new="memory"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    ContentType.objects.using(db).filter(app_label=old, model__in=MODELS).update(app_label=new)


def move_content_types_back(apps, schema_editor):
    move_content_types(apps, schema_editor, old="memory", new="ingest")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('ingest', '0003_move_models_to_memory'),
        ('tenants', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Document',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('original', models.FileField(max_length=500, upload_to=memory.models._original_path)),
                        ('filename', models.CharField(max_length=500)),
                        ('sha256', models.CharField(db_index=True, max_length=64)),
                        ('size', models.BigIntegerField(default=0)),
                        ('content_type', models.CharField(blank=True, help_text='as declared by the uploader', max_length=200)),
                        ('detected_type', models.CharField(blank=True, help_text='as detected from the content', max_length=32)),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('parsing', 'Parsing'), ('extracting', 'Extracting'), ('indexing', 'Indexing'), ('ready', 'Ready'), ('failed', 'Failed')], db_index=True, default='queued', max_length=16)),
                        ('stage', models.CharField(blank=True, max_length=200)),
                        ('progress', models.PositiveSmallIntegerField(default=0)),
                        ('error', models.TextField(blank=True)),
                        ('attempts', models.PositiveIntegerField(default=0)),
                        ('chunk_count', models.PositiveIntegerField(default=0)),
                        ('episode_count', models.PositiveIntegerField(default=0)),
                        ('fact_count', models.PositiveIntegerField(default=0)),
                        ('page_count', models.PositiveIntegerField(blank=True, null=True)),
                        ('extraction_mode', models.CharField(blank=True, help_text='llm or deterministic', max_length=16)),
                        ('metadata', models.JSONField(blank=True, default=dict)),
                        ('uploaded_by', models.CharField(blank=True, max_length=200)),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('claim_token', models.UUIDField(blank=True, editable=False, null=True)),
                        ('retryable', models.BooleanField(default=True, help_text='false when the failure is in the file itself')),
                        ('kb', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='documents', to='tenants.knowledgebase')),
                    ],
                    options={
                        'db_table': 'ingest_document',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='Chunk',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('level', models.CharField(choices=[('parent', 'Parent'), ('child', 'Child')], max_length=8)),
                        ('ordinal', models.PositiveIntegerField(help_text="position among the document's chunks of this level")),
                        ('text', models.TextField()),
                        ('section_path', models.JSONField(blank=True, default=list)),
                        ('page', models.PositiveIntegerField(blank=True, null=True)),
                        ('slide', models.PositiveIntegerField(blank=True, null=True)),
                        ('sheet', models.CharField(blank=True, max_length=200)),
                        ('start_time', models.FloatField(blank=True, help_text='seconds', null=True)),
                        ('end_time', models.FloatField(blank=True, help_text='seconds', null=True)),
                        ('speaker', models.CharField(blank=True, max_length=200)),
                        ('token_count', models.PositiveIntegerField(default=0)),
                        ('metadata', models.JSONField(blank=True, default=dict)),
                        ('parent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='children', to='memory.chunk')),
                        ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='memory.document')),
                    ],
                    options={
                        'db_table': 'ingest_chunk',
                        'ordering': ['document', 'level', 'ordinal'],
                    },
                ),
                migrations.CreateModel(
                    name='Memory',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('kind', models.CharField(choices=[('episode', 'Episode'), ('atomic_fact', 'Atomic Fact'), ('profile', 'Profile'), ('foresight', 'Foresight')], db_index=True, max_length=16)),
                        ('ordinal', models.PositiveIntegerField(default=0, help_text='fixed key within the document or segment')),
                        ('text', models.TextField()),
                        ('topic', models.CharField(blank=True, max_length=300)),
                        ('source_message_ids', models.JSONField(blank=True, default=list, help_text='client message ids cited')),
                        ('user_id', models.CharField(blank=True, db_index=True, max_length=200)),
                        ('session_id', models.CharField(blank=True, db_index=True, max_length=200)),
                        ('segment_id', models.UUIDField(blank=True, db_index=True, null=True)),
                        ('occurred_at', models.DateTimeField(blank=True, help_text='when it happened, if known', null=True)),
                        ('extraction_mode', models.CharField(blank=True, max_length=16)),
                        ('metadata', models.JSONField(blank=True, default=dict)),
                        ('content_hash', models.CharField(db_index=True, max_length=64)),
                        ('status', models.CharField(choices=[('active', 'Active'), ('disabled', 'Disabled'), ('superseded', 'Superseded')], db_index=True, default='active', max_length=16)),
                        ('created_at', models.DateTimeField(auto_now_add=True, db_index=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('document', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='memories', to='memory.document')),
                        ('kb', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memories', to='tenants.knowledgebase')),
                        ('parent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='facts', to='memory.memory')),
                        ('source_chunks', models.ManyToManyField(blank=True, related_name='memories', to='memory.chunk')),
                        ('superseded_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='memory.memory')),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memories', to='tenants.tenant')),
                    ],
                    options={
                        'verbose_name_plural': 'memories',
                        'db_table': 'ingest_memory',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='MemoryHistory',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('memory_id', models.UUIDField(db_index=True, help_text='kept after the memory is deleted')),
                        ('event', models.CharField(choices=[('ADD', 'Add'), ('UPDATE', 'Update'), ('DELETE', 'Delete')], max_length=8)),
                        ('old_text', models.TextField(blank=True)),
                        ('new_text', models.TextField(blank=True)),
                        ('old_status', models.CharField(blank=True, max_length=16)),
                        ('new_status', models.CharField(blank=True, max_length=16)),
                        ('actor', models.CharField(blank=True, max_length=200)),
                        ('reason', models.CharField(blank=True, max_length=300)),
                        ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memory_history', to='tenants.tenant')),
                    ],
                    options={
                        'verbose_name_plural': 'memory history',
                        'db_table': 'ingest_memoryhistory',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='Message',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('user_id', models.CharField(db_index=True, max_length=200)),
                        ('agent_id', models.CharField(blank=True, max_length=200)),
                        ('group_id', models.CharField(blank=True, max_length=200)),
                        ('session_id', models.CharField(db_index=True, max_length=200)),
                        ('message_id', models.CharField(help_text='client id, or generated', max_length=200)),
                        ('sender_id', models.CharField(blank=True, max_length=200)),
                        ('sender_name', models.CharField(blank=True, max_length=200)),
                        ('role', models.CharField(blank=True, max_length=32)),
                        ('content', models.TextField()),
                        ('timestamp', models.DateTimeField(db_index=True)),
                        ('segment_id', models.UUIDField(blank=True, db_index=True, help_text='MemCell once extracted', null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('kb', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='tenants.knowledgebase')),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='tenants.tenant')),
                    ],
                    options={
                        'db_table': 'ingest_message',
                        'ordering': ['timestamp', 'id'],
                    },
                ),
                migrations.AddConstraint(
                    model_name='document',
                    constraint=models.UniqueConstraint(fields=('kb', 'sha256'), name='document_unique_content_per_kb'),
                ),
                migrations.AddConstraint(
                    model_name='chunk',
                    constraint=models.UniqueConstraint(fields=('document', 'level', 'ordinal'), name='chunk_fixed_key'),
                ),
                migrations.AddIndex(
                    model_name='memory',
                    index=models.Index(fields=['tenant', 'kb', 'kind', 'status'], name='ingest_memo_tenant__1f2579_idx'),
                ),
                migrations.AddConstraint(
                    model_name='message',
                    constraint=models.UniqueConstraint(fields=('kb', 'user_id', 'session_id', 'message_id'), name='message_idempotent'),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
