"""crucible: autoresearch loops that end in reviewable draft pull requests.

The import package is ``controller``; the distribution and the command are ``crucible``.
Nothing here reads the environment or opens a database at import time (CONTRIBUTING.md, rule 7).
"""

__version__ = "0.1.0"
