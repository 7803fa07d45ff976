"""Forge accounts and their tokens, managed offline (``crucible forge user add``).

Tokens are stored only as SHA-256 digests; the plain token is returned once, to be printed.
Logins ending in ``[bot]`` become ``Bot`` accounts, like GitHub App bots, so ``trusted_bots``
can be exercised locally.
"""

from __future__ import annotations

import re
import secrets
import string
from pathlib import Path

from controller.domain.errors import ConflictError, PermanentError
from controller.localforge.models import AccountType
from controller.localforge.service import token_hash
from controller.localforge.storage import Storage

LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")


def new_token() -> str:
    """A random token shaped like a GitHub personal access token."""
    alphabet = string.ascii_letters + string.digits
    return "ghp_" + "".join(secrets.choice(alphabet) for _ in range(36))


def add_user(root: Path, name: str, *, admin: bool = False, token: str | None = None) -> str:
    """Create user ``name`` (or add a token to an existing user) and return the token.

    Raises ``PermanentError`` for an invalid login and ``ConflictError`` when ``name`` is an
    organization or ``token`` already belongs to another account.
    """
    if not LOGIN.fullmatch(name):
        raise PermanentError(f"invalid login {name!r}: letters, digits and hyphens (optionally '[bot]')")
    token = token or new_token()
    store = Storage(root / "forge.db")
    try:
        account = store.account_by_login(name)
        if account is None:
            kind = AccountType.BOT if name.endswith("[bot]") else AccountType.USER
            account = store.add_account(name, kind, site_admin=admin)
        elif account.type is AccountType.ORGANIZATION:
            raise ConflictError(f"{name} is an organization")
        owner = store.account_by_token(token_hash(token))
        if owner is not None and owner.id != account.id:
            raise ConflictError("that token already belongs to another account")
        store.add_token(account.id, token_hash(token))
    finally:
        store.close()
    return token


def add_org(root: Path, name: str, members: list[str]) -> None:
    """Create organization ``name`` (if new) and make ``members`` admins of its repositories.

    Raises ``PermanentError`` for an invalid login or an unknown member and ``ConflictError``
    when ``name`` is a user.
    """
    if not LOGIN.fullmatch(name) or name.endswith("[bot]"):
        raise PermanentError(f"invalid organization name {name!r}")
    store = Storage(root / "forge.db")
    try:
        org = store.account_by_login(name) or store.add_account(name, AccountType.ORGANIZATION)
        if org.type is not AccountType.ORGANIZATION:
            raise ConflictError(f"{name} is a user")
        for login in members:
            member = store.account_by_login(login)
            if member is None or member.type is AccountType.ORGANIZATION:
                raise PermanentError(f"no user {login}")
            store.add_org_member(org.id, member.id)
    finally:
        store.close()


TEAM_SLUG = re.compile(r"[a-z0-9](?:[a-z0-9_-]{0,99})")


def add_team(root: Path, org: str, slug: str, members: list[str], *, name: str | None = None) -> None:
    """Create team ``slug`` of organization ``org`` (if new) and add ``members`` to it.

    Teams exist for review requests (``team_reviewers``): a slug, a display name and members.
    Raises ``PermanentError`` for an invalid slug, an unknown organization or member.
    """
    if not TEAM_SLUG.fullmatch(slug):
        raise PermanentError(f"invalid team slug {slug!r}: lower-case letters, digits, '-' and '_'")
    store = Storage(root / "forge.db")
    try:
        owner = store.account_by_login(org)
        if owner is None or owner.type is not AccountType.ORGANIZATION:
            raise PermanentError(f"no organization {org}")
        team = store.team_by_slug(owner.id, slug) or store.add_team(owner.id, slug, name or slug, None)
        for login in members:
            member = store.account_by_login(login)
            if member is None or member.type is AccountType.ORGANIZATION:
                raise PermanentError(f"no user {login}")
            store.add_team_member(team.id, member.id)
    finally:
        store.close()
