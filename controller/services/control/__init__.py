"""Driving runs: the run service, round jobs, recovery, the scheduler and parking, submit, dry-run, demo.

The top services layer: the composition root builds these and the CLI and API call them.
"""
