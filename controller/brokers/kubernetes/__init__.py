"""The Kubernetes broker: one Job per round whose pod runs ``crucible worker`` (docs/kubernetes.md, ADR-0015).

Only this package imports the ``kubernetes`` client (``.importlinter``), and only in ``broker``:
``manifest`` is plain JSON so that ``crucible loop --dry-run`` can print a Job without the client.
"""
