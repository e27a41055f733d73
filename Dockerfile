# The application image: API, workers, beat and Flower all run from it (compose.yaml).
# The base is pinned to a patch release, as compose.yaml pins its images.
FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MEMBRANE_DATA_DIR=/var/lib/membrane

# The package's extras the image installs: tracing (RFC 14.4) by default; add `local` for the
# local embedding model (RFC 12.1), with PIP_EXTRA_INDEX_URL set to PyTorch's CPU index so
# that pip takes the CPU build of torch: --build-arg MEMBRANE_EXTRAS=otel,local
ARG MEMBRANE_EXTRAS=otel
ARG PIP_EXTRA_INDEX_URL

WORKDIR /app
COPY pyproject.toml README.md beat_schedule.py ./
COPY membrane_core ./membrane_core
COPY api ./api
COPY workers ./workers
COPY membrane_cli ./membrane_cli
RUN pip install ".[${MEMBRANE_EXTRAS}]" \
 && useradd --system --uid 10001 --home-dir /var/lib/membrane --shell /usr/sbin/nologin membrane \
 && mkdir -p /var/lib/membrane && chown membrane:membrane /var/lib/membrane

USER membrane
EXPOSE 8080 5555
# Without API keys the API refuses a non-loopback address (RFC 7.5); compose sets them.
CMD ["python", "-m", "api", "--host", "0.0.0.0", "--port", "8080"]
