# crucible's image: the controller (`crucible serve`, the default command) and the base of loop pod images
# (`FROM` this image, add the project's toolchain and agent; the broker's pods run `crucible worker`).
# Two stages so that compilers never reach the running image: the build stage installs crucible and its
# dependencies into a virtualenv, the runtime stage copies only that virtualenv.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# Build tools for any dependency that has no wheel for the platform (only needed here).
# Debian versions are not pinned: the base image tag fixes the release, and pinned patch versions vanish
# from the mirror when security updates land, which breaks the build without making it any safer.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY controller ./controller
RUN python -m venv /opt/crucible \
 && /opt/crucible/bin/pip install --no-cache-dir --disable-pip-version-check ".[kubernetes]"

FROM ${PYTHON_IMAGE}
# git: crucible drives git for every workspace; bubblewrap: the sandbox of agent and metric commands.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bubblewrap \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 crucible \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/crucible crucible
COPY --from=build /opt/crucible /opt/crucible
ENV PATH=/opt/crucible/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CRUCIBLE_HOME=/home/crucible/.local/share/crucible
# Numeric user so that runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
WORKDIR /home/crucible
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["crucible"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
