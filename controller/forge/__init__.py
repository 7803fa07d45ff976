"""forge layer (a row of the layers contract in .importlinter): where pull requests live.

``base`` states the ``Forge`` contract and its types, ``auth`` the credentials read at the edge,
and ``github`` the one adapter (GitHub, GitHub Enterprise, the local forge), which is the only
module that imports PyGithub. ``GithubForge`` is loaded on first use, so importing the types does
not import PyGithub.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.forge.auth import ForgeCredentials, from_env
from controller.forge.base import (
    Forge,
    ForgeError,
    ForgeNotFound,
    ForgeRateLimited,
    PullInfo,
    RepoInfo,
)

if TYPE_CHECKING:
    from controller.forge.github import GithubForge

__all__ = [
    "Forge",
    "ForgeCredentials",
    "ForgeError",
    "ForgeNotFound",
    "ForgeRateLimited",
    "GithubForge",
    "PullInfo",
    "RepoInfo",
    "from_env",
]


def __getattr__(name: str) -> object:
    if name == "GithubForge":
        from controller.forge.github import GithubForge

        return GithubForge
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
