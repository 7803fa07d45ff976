"""Where the third-party test data lives, so tests and benchmarks find it inside the clone.

GitHub's own webhook examples and REST API description are the oracles the forge adapters, the webhook
endpoint and the local forge are checked against (see README.md here for source, version and licence).
"""

from __future__ import annotations

from pathlib import Path

TESTDATA = Path(__file__).resolve().parent
WEBHOOKS = TESTDATA / "github-webhooks"
OPENAPI_SUBSET = TESTDATA / "github-openapi" / "api.github.com.subset.json"
