"""OpenTelemetry tracing: an HTTP request, a search's stages, a document's stages and every LLM call as spans.

Off unless LOCI_OTLP_ENDPOINT names an OTLP/HTTP collector; then spans go there in batches (the SDK's
BatchSpanProcessor: a background thread, never the request's). Off, `span()` hands back one shared no-op
context manager: the SDK is not even imported, and no span object is made on the hot path.

The tracer provider is this module's own, not OpenTelemetry's global one, so that a test can swap in the
SDK's in-memory exporter (`configure(exporter)`) and take it out again (`shutdown()`); the global one may
be set only once per process.
"""

from contextlib import nullcontext

from django.conf import settings

TRACER_NAME = "loci"
_OFF = nullcontext()
_provider = None
_tracer = None


def enabled() -> bool:
    return _tracer is not None


def span(name: str, attributes: dict | None = None):
    """A context manager that records `name` as a span, a child of the current one; a no-op when tracing is off."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(name, attributes=attributes)


def configure(exporter=None) -> None:
    """Start tracing into `exporter` (each span exported as it ends), else to LOCI_OTLP_ENDPOINT; else stay off."""
    global _provider, _tracer
    if exporter is None and not settings.LOCI_OTLP_ENDPOINT:
        return
    # Imported only when tracing is on: a process that does not trace never loads the SDK.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.LOCI_OTLP_ENDPOINT))
    else:
        processor = SimpleSpanProcessor(exporter)
    shutdown()
    _provider = TracerProvider(resource=Resource.create({"service.name": settings.LOCI_OTEL_SERVICE_NAME}))
    _provider.add_span_processor(processor)
    _tracer = _provider.get_tracer(TRACER_NAME)


def shutdown() -> None:
    """Export what is pending and turn tracing off."""
    global _provider, _tracer
    if _provider is not None:
        _provider.shutdown()
    _provider = _tracer = None


class TracingMiddleware:
    """One span per request, named by its route (`POST /api/v1/memories/search`), continuing the caller's
    trace when the request carries a W3C `traceparent` header."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if _tracer is None:
            return self.get_response(request)
        from opentelemetry import propagate, trace

        attributes = {"http.request.method": request.method, "url.path": request.path}
        with _tracer.start_as_current_span(f"{request.method} {request.path}", context=propagate.extract(request.headers),
                                           kind=trace.SpanKind.SERVER, attributes=attributes) as current:
            response = self.get_response(request)
            route = _route(request)
            if route:
                current.update_name(f"{request.method} {route}")
                current.set_attribute("http.route", route)
            current.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 500:
                current.set_status(trace.StatusCode.ERROR)
            return response


def _route(request) -> str | None:
    """The URL pattern that matched, as a path (the routers' regexes end in an optional slash and `$`):
    the same name for every request of one operation, whatever ids it carries."""
    pattern = getattr(request.resolver_match, "route", None)
    if not pattern:
        return None
    return "/" + pattern.removeprefix("^").removesuffix("$").removesuffix("/?")
