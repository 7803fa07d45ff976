"""Tests of the feedback services: trust and the poller (issue 4)."""
