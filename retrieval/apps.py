from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here: the receivers use the models, which exist only once the registry is ready.
        from common import metrics
        from memory import signals as memory_signals
        from retrieval import signals
        from retrieval.metrics_state import StateCollector
        from tenants import signals as tenant_signals

        metrics.register_state(StateCollector())
        from celery import signals as celery_signals

        from retrieval import warmup

        # Each worker process (prefork children included) loads its models as it starts.
        celery_signals.worker_process_init.connect(lambda **kw: warmup.start(), weak=False,
                                                   dispatch_uid="retrieval.warmup")

        for signal, receiver in [
            (memory_signals.memories_changed, signals.index_memories),
            (memory_signals.memories_deleted, signals.remove_memories),
            (memory_signals.user_memories_deleted, signals.remove_user_memories),
            (memory_signals.chunks_deleted, signals.remove_chunks),
            (memory_signals.document_deleted, signals.remove_document),
            (memory_signals.document_withdrawn, signals.remove_document),
            (memory_signals.knowledge_bases_deleted, signals.remove_knowledge_bases),
            (tenant_signals.isolation_set, signals.move_tenant),
        ]:
            signal.connect(receiver, dispatch_uid=f"retrieval.{receiver.__name__}")
