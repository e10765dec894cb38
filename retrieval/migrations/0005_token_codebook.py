import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('retrieval', '0004_token_vectors_of_messages'),
        ('tenants', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='TokenCodebook',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('model', models.CharField(max_length=96)),
                ('name', models.CharField(max_length=160)),
                ('k', models.PositiveIntegerField()),
                ('fitted_tokens', models.PositiveIntegerField(help_text="the KB's token count when it was fitted")),
                ('coded_tokens', models.PositiveBigIntegerField(default=0, help_text='tokens fitted on plus those coded since')),
                ('centroids', models.BinaryField(help_text='k x dim float32')),
                ('generation', models.PositiveBigIntegerField(default=0)),
                ('kb', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.knowledgebase')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.tenant')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('kb', 'model'), name='token_codebook_one_per_kb_and_model')],
            },
        ),
        migrations.AddField(
            model_name='tokenvectors',
            name='codebook',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='retrieval.tokencodebook'),
        ),
        migrations.AddField(
            model_name='tokenvectors',
            name='codes',
            field=models.BinaryField(blank=True, null=True),
        ),
    ]
