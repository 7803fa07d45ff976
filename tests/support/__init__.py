"""What many tests need, written once (issue 22: the ``store`` fixture was copied 17 times, a clock 5, a
polling helper about 10).

- ``clock``: ``Clock``, a datetime clock moved by hand, ``Ticker``, one that advances a second per
  reading (order by time is then deterministic), and ``Ahead``, the real clock that a test may move
  ahead (the local forge's, whose timestamps have one-second resolution, instead of a 1.1 s sleep);
  ``Sleeps``, a float monotonic clock whose ``sleep`` moves it and records the wait.
- ``waiting``: ``wait_until``, polling a condition with a deadline instead of sleeping a guessed time.
- ``records``: builders of the records tests store (``new_run``, ``component``), keyword arguments only.
- ``builders``: ``spec_text``, the smallest valid spec with what a test changes, and ``root_for``, a
  composition root over the test's own home and SQLite file.
- ``memory_ledger`` and ``scripted_executor``: the round engine's fakes (a ``Ledger`` in a dict, an
  ``Executor`` whose commands are Python functions), each passing the real part's contract suite
  (``tests/ledger``, ``tests/services/test_executor_contract.py``); imported from their modules.
- ``fixtures``: the ``store`` fixture (an upgraded ``Store`` over ``database_url``, closed after the
  test) and ``clock``; ``tests/conftest.py`` loads them for every test.
"""

from tests.support.builders import root_for, spec_text
from tests.support.clock import T0, Ahead, Clock, Sleeps, Ticker
from tests.support.records import SHA_A, SHA_B, component, new_run
from tests.support.waiting import wait_until

__all__ = [
    "SHA_A",
    "SHA_B",
    "T0",
    "Ahead",
    "Clock",
    "Sleeps",
    "Ticker",
    "component",
    "new_run",
    "root_for",
    "spec_text",
    "wait_until",
]
