# The Loci application image: the web app (uvicorn), Celery workers and the `init` job of
# docker-compose.yml all run it, with different commands.
FROM python:3.11-slim-bookworm

# System packages for the parsers: OCR (Chinese and English), LibreOffice for legacy Office files,
# CJK fonts, poppler, libmagic. This is .ci/run's APT_PACKAGES minus the two packages only the test
# suite needs there: chromium (browser tests) and make (the README's `make test`).
# tests/test_compose.py parses both files and fails if the lists drift apart.
ARG APT_PACKAGES="tesseract-ocr tesseract-ocr-chi-sim tesseract-ocr-eng libreoffice-writer libreoffice-calc \
libreoffice-impress fonts-noto-cjk poppler-utils libmagic1"
RUN apt-get update \
    && apt-get install -y --no-install-recommends $APT_PACKAGES \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY . /app
RUN pip install /app

# Run from the source tree: settings.py derives BASE_DIR (templates/, static/) from its own location,
# and those folders are not part of the installed package. VAR_DIR holds only per-container state
# here (collected static files, the embedding cache): the data lives in PostgreSQL, Milvus,
# OpenSearch and the shared media volume.
ENV PYTHONPATH=/app \
    LOCI_VAR_DIR=/app/var \
    LOCI_MEDIA_ROOT=/data/media
RUN python manage.py collectstatic --no-input -v 0

# LibreOffice needs a writable home; the media folder is created here so a fresh named volume
# mounted over it starts owned by the app user.
RUN useradd --create-home --uid 10001 loci \
    && mkdir -p /data/media /app/var \
    && chown -R loci:loci /data /app/var
USER loci

EXPOSE 8000
CMD ["uvicorn", "loci.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--no-access-log"]
