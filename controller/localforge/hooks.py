"""Repository webhooks as GitHub's hook API manages them: create (with the first ``ping``), read,
edit (``events``/``add_events``/``remove_events``/``active``/``config``), the separate ``config``
endpoint, pings on demand, and the recent deliveries with their requests.

Deliveries are kept in memory by the dispatcher (the last 500 of the forge, newest first), so
the history starts again when the forge restarts; GitHub keeps 30 days.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from controller.localforge.errors import Invalid, NotFound
from controller.localforge.models import Hook, Repo, Role
from controller.localforge.service import Ctx, Forge
from controller.localforge.webhooks import Delivery, Target

Json = dict[str, Any]


def _events(value: Any, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(e, str) for e in value):
        raise Invalid([{"resource": "Hook", "code": "invalid", "field": field}])
    return value


def _stamp(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Hooks:
    """The hook API of one forge (admin only, as on GitHub)."""

    def __init__(self, forge: Forge) -> None:
        self.forge = forge

    def create(self, ctx: Ctx, repo: Repo, payload: Json) -> Hook:
        self.forge.require(ctx, repo, Role.ADMIN)
        config = payload.get("config")
        url = config.get("url") if isinstance(config, dict) else None
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise Invalid(
                [{"resource": "Hook", "code": "custom", "message": "Config must contain a valid url"}]
            )
        secret = config.get("secret") if isinstance(config, dict) else None
        events = _events(payload.get("events") or ["push"], "events")
        active = bool(payload.get("active", True))
        hook = self.forge.store.add_hook(
            repo.id, url, secret if isinstance(secret, str) else None, events, active
        )
        self.ping(ctx, repo, hook)  # GitHub pings every new hook
        return hook

    def get(self, ctx: Ctx, repo: Repo, hook_id: int) -> Hook:
        self.forge.require(ctx, repo, Role.ADMIN)
        found = self.forge.store.hooks(repo.id, hook_id=hook_id)
        if not found:
            raise NotFound()
        return found[0]

    def update(self, ctx: Ctx, repo: Repo, hook_id: int, payload: Json) -> Hook:
        """``PATCH /hooks/{id}``: replace or add/remove events, (de)activate, change the config."""
        hook = self.get(ctx, repo, hook_id)
        values: Json = {}
        events = list(hook.events)
        if "events" in payload:
            events = _events(payload["events"], "events")
        events += [e for e in _events(payload.get("add_events", []), "add_events") if e not in events]
        removed = set(_events(payload.get("remove_events", []), "remove_events"))
        values["events"] = [e for e in events if e not in removed]
        if "active" in payload:
            values["active"] = bool(payload["active"])
        self.forge.store.update_hook(hook.id, **values)
        if isinstance(payload.get("config"), dict):
            return self.update_config(ctx, repo, hook.id, payload["config"])
        return self.get(ctx, repo, hook.id)

    def update_config(self, ctx: Ctx, repo: Repo, hook_id: int, config: Json) -> Hook:
        """``PATCH /hooks/{id}/config``: ``url`` and ``secret`` (other members are accepted and ignored)."""
        hook = self.get(ctx, repo, hook_id)
        values: Json = {}
        url = config.get("url", hook.url)
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise Invalid(
                [{"resource": "Hook", "code": "custom", "message": "Config must contain a valid url"}]
            )
        values["url"] = url
        if "secret" in config:
            values["secret"] = (
                config["secret"] if isinstance(config["secret"], str) and config["secret"] else None
            )
        self.forge.store.update_hook(hook.id, **values)
        return self.get(ctx, repo, hook.id)

    def delete(self, ctx: Ctx, repo: Repo, hook_id: int) -> None:
        self.forge.store.delete_hook(self.get(ctx, repo, hook_id).id)

    def ping(self, ctx: Ctx, repo: Repo, hook: Hook) -> None:
        """GitHub's ``ping``, sent whatever events the hook subscribes to."""
        payload = {
            "zen": "Keep it logically awesome.",
            "hook_id": hook.id,
            "hook": self.to_json(ctx, repo, hook),
        }
        target = Target(hook.url, hook.secret, ("ping",), hook_id=hook.id, repo_id=repo.id)
        self.forge.dispatcher.send([target], "ping", {**payload, **self.forge.envelope(ctx, repo)})

    def deliveries(self, ctx: Ctx, repo: Repo, hook_id: int) -> list[Delivery]:
        return self.forge.dispatcher.deliveries(self.get(ctx, repo, hook_id).id)

    def delivery(self, ctx: Ctx, repo: Repo, hook_id: int, delivery_id: int) -> Delivery:
        for found in self.deliveries(ctx, repo, hook_id):
            if found.id == delivery_id:
                return found
        raise NotFound()

    # -- json ----------------------------------------------------------------------------------

    @staticmethod
    def config_json(hook: Hook) -> Json:
        config = {"url": hook.url, "content_type": "json", "insecure_ssl": "0"}
        if hook.secret:
            config["secret"] = "********"
        return config

    def to_json(self, ctx: Ctx, repo: Repo, hook: Hook) -> Json:
        url = f"{ctx.urls.repo_api(repo)}/hooks/{hook.id}"
        last = next(iter(self.forge.dispatcher.deliveries(hook.id)), None)
        response: Json = {"code": None, "status": "unused", "message": None}
        if last is not None:
            ok = 200 <= last.status < 300
            response = {
                "code": last.status or None,
                "status": "active" if ok else "failed",
                "message": last.error,
            }
        return {
            "type": "Repository",
            "id": hook.id,
            "name": "web",
            "active": hook.active,
            "events": list(hook.events),
            "config": self.config_json(hook),
            "updated_at": hook.updated_at,
            "created_at": hook.created_at,
            "url": url,
            "test_url": f"{url}/test",
            "ping_url": f"{url}/pings",
            "deliveries_url": f"{url}/deliveries",
            "last_response": response,
        }

    @staticmethod
    def delivery_json(item: Delivery, *, full: bool = False) -> Json:
        """GitHub's ``hook-delivery-item`` (``full``: ``hook-delivery`` with request and response)."""
        payload = json.loads(item.body) if item.body else None
        out: Json = {
            "id": item.id,
            "guid": item.guid,
            "delivered_at": _stamp(item.delivered_at),
            "redelivery": False,
            "duration": round(item.duration, 2),
            "status": "OK" if 200 <= item.status < 300 else (item.error or "failed"),
            "status_code": item.status,
            "event": item.event,
            "action": payload.get("action") if isinstance(payload, dict) else None,
            "installation_id": None,
            "repository_id": item.repo_id,
            "throttled_at": None,
        }
        if full:
            out["url"] = item.url
            out["request"] = {"headers": dict(item.headers), "payload": payload}
            out["response"] = {"headers": {}, "payload": None}
        return out
