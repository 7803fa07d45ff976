"""Read models of a run: the typed views, the run's files on disk, the patch and the user's checkout.

The lowest services layer: it reads the store and the run directory and decides nothing, so every
other layer (and the API and CLI) can show a run without importing the turn engine.
"""
