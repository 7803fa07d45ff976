# Minimal image for the controller (`crucible serve` arrives with its issue; until then the CLI).
# git and bubblewrap are runtime dependencies: crucible drives git and sandboxes commands with bwrap.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git bubblewrap && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 10001 crucible
WORKDIR /app
COPY pyproject.toml README.md ./
COPY controller ./controller
RUN pip install --no-cache-dir .
USER crucible
ENV CRUCIBLE_HOME=/home/crucible/.local/share/crucible
ENTRYPOINT ["crucible"]
CMD ["--help"]
