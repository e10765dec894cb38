"""Rendered decks (LibreOffice → PDF) kept for the slide viewer, and removed with their document.

Kept on the web server's disk under MEDIA_ROOT/previews/<tenant>/<kb>/: deleted means deleted, so
a delete of a document, a knowledge base or a tenant (memory/signals.py) removes their previews
after its commit, as the originals go (a rolled-back delete keeps them).
"""

import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction


def _root() -> Path:
    return Path(settings.MEDIA_ROOT) / "previews"


def preview_path(document) -> Path:
    """Where this document's rendered slides are kept (the hash in the name: a preview is of one content)."""
    return _root() / str(document.kb.tenant_id) / str(document.kb_id) / f"{document.pk}-{document.sha256[:16]}.pdf"


def remove_document_previews(sender, *, tenant_id, kb_id, document_id, **kwargs) -> None:
    folder = _root() / str(tenant_id) / str(kb_id)
    transaction.on_commit(lambda: [path.unlink(missing_ok=True) for path in folder.glob(f"{document_id}-*.pdf")])


def remove_knowledge_base_previews(sender, *, tenant_id, knowledge_bases, **kwargs) -> None:
    folders = [_root() / str(tenant_id) / str(kb_id) for kb_id, _ in knowledge_bases]
    transaction.on_commit(lambda: [shutil.rmtree(folder, ignore_errors=True) for folder in folders])
