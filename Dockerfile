# syntax=docker/dockerfile:1
#
# The coffre image: one image, every service (`coffre ingest`, `coffre vault`, `coffre acquittal`,
# `coffre regulator-api`).
#
# NOT BUILT on the machine where it was written: there is no Docker engine there. The Helm chart
# (deploy/helm/coffre) was rendered and validated offline, but this file has never run. Build and
# run it once before relying on it:
#   docker build -t registry.example.com/coffre:0.1.0 .
#   docker run --rm registry.example.com/coffre:0.1.0 --help
#
# Multi-stage: the builder makes the wheels and installs them into a virtualenv; the final image
# gets only that virtualenv (no compiler, no pip, no build files). coffre signs with lxml and
# cryptography from their wheels: xmlsec1 and other system libraries are not needed.
# In production, pin both FROM lines by digest (python:3.11-slim-bookworm@sha256:…).

FROM python:3.11-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# What `pip wheel .` needs, nothing more (.dockerignore keeps the rest out of the context).
COPY pyproject.toml README.md ./
COPY coffre ./coffre
COPY services ./services
# coffre's wheel and every dependency's, then a venv from those wheels only. Every dependency
# publishes wheels for CPython 3.11 on Linux or is pure Python; if one day one does not, add
# build-essential to this stage (it never reaches the final image).
RUN python -m pip wheel --wheel-dir /wheels . \
 && python -m venv /opt/coffre \
 && /opt/coffre/bin/pip install --no-index --find-links /wheels coffre \
 && /opt/coffre/bin/pip uninstall --yes pip setuptools wheel

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="coffre" \
      org.opencontainers.image.description="Signed, hash-chained vault for French licensed online-gambling operators (ANJ/ARJEL DET)"
# A fixed non-root identity, the chart's podSecurityContext (10001:10001). The data directory is
# the only place it writes besides /tmp; in Kubernetes both are volumes and the root filesystem
# is read-only.
RUN groupadd --system --gid 10001 coffre \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin coffre \
 && install --directory --owner 10001 --group 10001 --mode 0750 /var/lib/coffre
# The venv's python links to /usr/local/bin/python3.11, the same in both stages.
COPY --from=builder /opt/coffre /opt/coffre
ENV PATH=/opt/coffre/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    COFFRE_DATA_DIR=/var/lib/coffre \
    COFFRE_HTTP_HOST=0.0.0.0 \
    COFFRE_API_HOST=0.0.0.0
WORKDIR /var/lib/coffre
USER 10001:10001
# 8080: /healthz, /readyz, /metrics (every service; 8081 for `coffre regulator-api` beside a vault).
# 8443: the regulator API (`coffre regulator-api`).
EXPOSE 8080 8443
# Exec form: no shell at run time; SIGTERM reaches coffre directly (it drains, fsyncs, commits).
ENTRYPOINT ["coffre"]
CMD ["--help"]
