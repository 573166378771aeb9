"""A hook for the `team-quota` Katalog, in Python (componentize-py): each Team gets a
ResourceQuota sized by its tier and its number of members, and the status says how much
it got. The host applies the quota, owned by the Team, after checking the grant."""

import json

from wit_world import exports
from wit_world.imports import log, types

CPU_PER_MEMBER = {"free": 1, "pro": 2, "enterprise": 4}


def respond(resources=(), status=None, outcome=None):
    return types.Response(
        outcome=outcome or types.Outcome_Ok(),
        resources=[json.dumps(r) for r in resources],
        status=json.dumps(status) if status is not None else None,
        events=[],
    )


class Hooks(exports.Hooks):
    def on_reconcile(self, request: types.Request) -> types.Response:
        team = json.loads(request.object or "{}")
        name = team["metadata"]["name"]
        spec = team.get("spec") or {}
        tier = spec.get("tier", "free")
        members = spec.get("members") or []
        if tier not in CPU_PER_MEMBER:
            failure = types.Failure(reason="UnknownTier", message=f"tier {tier!r} is not one of free, pro, enterprise")
            return respond(outcome=types.Outcome_Error(failure))
        cpu = CPU_PER_MEMBER[tier] * max(len(members), 1)
        quota = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": f"{name}-quota"},
            "spec": {"hard": {"requests.cpu": str(cpu), "requests.memory": f"{2 * cpu}Gi", "pods": str(5 * cpu)}},
        }
        log.log(log.Level.INFO, f"{request.key}: {cpu} CPUs for {len(members)} members on {tier}")
        return respond([quota], {"cpu": cpu, "members": len(members), "renderedBy": "python-hook"})

    def on_delete(self, request: types.Request) -> types.Response:
        return respond()

    def on_not_found(self, request: types.Request) -> types.Response:
        return respond()
