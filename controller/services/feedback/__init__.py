"""The feedback edge: publishing PRs, drift, the poller and intake, trust, the watch and its rounds.

Built on ``execution`` (a refinement round plays turns); knows nothing of remote workers or of the
service that drives runs.
"""
