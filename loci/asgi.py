import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
application = get_asgi_application()

from ingest.upload_limits import RequestBodyLimit  # noqa: E402  (needs the settings configured above)
from integrations.mcp_http import with_mcp  # noqa: E402

from retrieval import warmup  # noqa: E402

# MCP (streamable HTTP) at /mcp beside Django; the body limit covers both.
application = RequestBodyLimit(with_mcp(application))
warmup.start()  # the embedding model loads now, beside the first requests, not inside a search's deadline
