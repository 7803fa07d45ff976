"""Rounds executed away from the controller: ``crucible worker``, its tokens and bundles, lost pods.

Above ``feedback`` because a worker plays refinement rounds too; below ``control``, which launches
the rounds and recovers from their loss.
"""
