"""The knobs round both remote paths replay against a local one (``crucible worker`` through the
subprocess broker, and through a Kubernetes Job): one spec and one metric, so the two tests compare the
same round. ``slow.txt`` in the repository, when present, holds seconds each metric run sleeps (a test
that must catch a round mid-way slows it)."""

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
time.sleep(float(open("slow.txt").read()) if os.path.exists("slow.txt") else 0)
print(f"METRIC m={(a - 4) ** 2 + 1}")
"""
