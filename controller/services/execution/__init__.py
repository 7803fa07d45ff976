"""Executing a run: the live context, commands, measurement, turns, hypotheses and the round-0 loop.

Sits above ``views`` and below everything that publishes or steers: a turn knows nothing of PRs,
feedback, remote workers or the scheduler.
"""
