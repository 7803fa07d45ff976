"""The command of the contract suite's loop pods: a stand-in for ``crucible worker`` (stdlib only).

It does what the worker does at the edges: reads its controller URL and token from the environment (the
token from the round's Secret), asks the controller to run its round, follows it to its end, and on
SIGTERM (a cancelled round: its Job deleted) tells the controller to stop the round and waits for it to
say how it ended. Exit 0 when the round ran to its end; 1 with the reason on stdout otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from typing import Any

URL = os.environ["CRUCIBLE_CONTROLLER_URL"].rstrip("/")
TOKEN = os.environ["CRUCIBLE_WORKER_TOKEN"]


def call(method: str, path: str) -> Any:
    request = urllib.request.Request(URL + path, method=method, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def cancelled(signum: int, frame: object) -> None:
    call("POST", "/cancel")


def main() -> int:
    signal.signal(signal.SIGTERM, cancelled)
    call("POST", "/start")
    while True:
        state = call("GET", "/status")
        if state["done"]:
            if state["error"]:
                print(state["error"], flush=True)
                return 1
            return 0
        time.sleep(0.05)


if __name__ == "__main__":
    sys.exit(main())
