"""The knobs round both remote paths replay against a local one (``crucible worker`` through the
subprocess broker, and through a Kubernetes Job): one spec and one metric, so the two tests compare the
same round. ``gate.txt`` in the repository, when present, holds a turn number and a path: each metric
run of that turn or a later one (``CRUCIBLE_TURN``) waits until the path exists, so a test that must
catch a round mid-way holds it there until it has done what it came to do, and then opens the gate.
(It slowed every metric run by a fixed 0.7-1 s before: ~10 s a test, and still a race on a slow
machine.)"""

KNOBS_SPEC = """
objective = "bring m down"
turns = 4

[agent]
builtin = "knobs"
seed = 11

[[agent.knob]]
file = "conf.json"
key = "a"
values = [1, 2, 3, 4, 5, 6]

[sandbox]
mode = "none"

[metric]
command = "python3 bench.py"
name = "m"
direction = "minimize"
samples = 3
warmups = 0
confidence = 0
interleave = false
sequential = false

[[component]]
name = "app"
repo = "."
mutable = ["conf.json"]
"""

BENCH = """
import json, os, time
a = json.load(open("conf.json"))["a"]
if os.path.exists("gate.txt"):
    first, gate = open("gate.txt").read().split(maxsplit=1)
    if int(os.environ["CRUCIBLE_TURN"]) >= int(first):
        for _ in range(6000):  # 5 minutes at most: a test that never opens it fails on its own
            if os.path.exists(gate):
                break
            time.sleep(0.05)
print(f"METRIC m={(a - 4) ** 2 + 1}")
"""
