"""A hook for the `team-quota` Katalog, in Python (componentize-py) with the orkestra_guest
SDK (guest-sdk/python): each Team gets a ResourceQuota sized by its tier and its number of
members, and the status says how much it got. The host applies the quota, owned by the
Team, after checking the grant."""

from orkestra_guest import Hook, Request, Resource, Response, hooks, log

CPU_PER_MEMBER = {"free": 1, "pro": 2, "enterprise": 4}


class TeamQuota(Hook):
    def on_reconcile(self, request: Request) -> Response:
        tier = request.spec.get("tier", "free")
        members = request.spec.get("members") or []
        if tier not in CPU_PER_MEMBER:
            return Response.error("UnknownTier", f"tier {tier!r} is not one of free, pro, enterprise")
        cpu = CPU_PER_MEMBER[tier] * max(len(members), 1)
        quota = Resource("v1", "ResourceQuota", f"{request.name}-quota").field(
            "spec", {"hard": {"requests.cpu": str(cpu), "requests.memory": f"{2 * cpu}Gi", "pods": str(5 * cpu)}}
        )
        log.info(f"{request.key}: {cpu} CPUs for {len(members)} members on {tier}")
        return (
            Response.ok()
            .resource(quota)
            .status("cpu", cpu)
            .status("members", len(members))
            .status("renderedBy", "python-hook")
        )


Hooks = hooks(TeamQuota)
