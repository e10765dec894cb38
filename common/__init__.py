"""The helpers every app may import, and that import no app: environment settings (env), the backend
handler (backends), the LLM client (llm), shared SQLite files (sqlite), JSON logs (logging), the API's
errors, fields, parser and pagination, dates, and the Prometheus metrics. The Django project that
wires the apps together is `loci/`; nothing here imports it."""
