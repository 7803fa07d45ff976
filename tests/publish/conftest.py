"""The ``world`` fixture (a local forge with alice's repository and crucible pointed at it) for every
publishing test; it is defined beside the tests that introduced it."""

from tests.publish.test_publish import world

__all__ = ["world"]
