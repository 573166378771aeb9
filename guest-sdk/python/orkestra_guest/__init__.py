"""orkestra_guest: Orkestra-rs hooks in Python, for componentize-py.

The same layer as the Rust SDK (guest-sdk/src): a `Request` that parses the custom resource
once, a `Response` built by chaining, `Resource` for children, `kube` calls that return
dicts and raise `KubeError`, and `log`. A hook is a class with `on_reconcile` (and
optionally `on_delete`, `on_not_found`); `hooks(MyHook)` turns it into the `Hooks` export
componentize-py looks for:

    from orkestra_guest import Hook, Request, Response, Resource, hooks

    class Greeter(Hook):
        def on_reconcile(self, request: Request) -> Response:
            who = request.spec.get("who", "world")
            return Response.ok().resource(
                Resource("v1", "ConfigMap", f"{request.name}-greeting").field("data", {"message": f"Hello, {who}!"})
            )

    Hooks = hooks(Greeter)

Build with `componentize-py -d WIT -w hook componentize app -p . -p PATH/TO/guest-sdk/python -o hook.wasm`.
"""

import json
from typing import Any, Dict, List, Optional

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import kube as _kube
from wit_world.imports import log as _log
from wit_world.imports import types as _types

__all__ = ["Hook", "Request", "Response", "Resource", "KubeError", "NotFound", "Forbidden", "kube", "log", "hooks"]


class Request:
    """One reconcile of one custom resource; the object and context are parsed on first use."""

    def __init__(self, raw: _types.Request):
        self.raw = raw
        self.key: str = raw.key
        self.sentinels: List[str] = list(raw.sentinels)
        self.target: Optional[str] = raw.target
        self._object: Optional[Dict[str, Any]] = None
        self._context: Optional[Dict[str, Any]] = None

    @property
    def object(self) -> Dict[str, Any]:
        """The custom resource (empty in `on_not_found`)."""
        if self._object is None:
            self._object = json.loads(self.raw.object) if self.raw.object else {}
        return self._object

    @property
    def context(self) -> Dict[str, Any]:
        """What the pipeline knows: health, metrics, cross, external, args, children."""
        if self._context is None:
            self._context = json.loads(self.raw.context or "{}")
        return self._context

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def namespace(self) -> Optional[str]:
        return self.key.split("/", 1)[0] if "/" in self.key else None

    @property
    def spec(self) -> Dict[str, Any]:
        return self.object.get("spec") or {}

    @property
    def status(self) -> Dict[str, Any]:
        return self.object.get("status") or {}

    @property
    def args(self) -> Dict[str, Any]:
        """The Katalog's templated hook arguments."""
        return self.context.get("args") or {}

    @property
    def children(self) -> Dict[str, Any]:
        """The children the templates applied (hooks that run after them)."""
        return self.context.get("children") or {}


class Resource:
    """A child object the host applies, owned by the custom resource."""

    def __init__(self, api_version: str, kind: str, name: str):
        self.object: Dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}

    def namespace(self, namespace: str) -> "Resource":
        self.object["metadata"]["namespace"] = namespace
        return self

    def label(self, key: str, value: str) -> "Resource":
        self.object["metadata"].setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> "Resource":
        self.object["metadata"].setdefault("annotations", {})[key] = value
        return self

    def field(self, key: str, value: Any) -> "Resource":
        """A top-level field such as `spec` or `data`."""
        self.object[key] = value
        return self


class Response:
    """What a call returns: an outcome, children, status fields and events."""

    def __init__(self, outcome: Any):
        self._outcome = outcome
        self._resources: List[str] = []
        self._status: Dict[str, Any] = {}
        self._events: List[_types.Event] = []

    @staticmethod
    def ok() -> "Response":
        return Response(_types.Outcome_Ok())

    @staticmethod
    def requeue_after(milliseconds: int) -> "Response":
        return Response(_types.Outcome_RequeueAfter(int(milliseconds)))

    @staticmethod
    def error(reason: str, message: str) -> "Response":
        """Ready=False with `reason` (CamelCase), then a retry with backoff."""
        return Response(_types.Outcome_Error(_types.Failure(reason=reason, message=message)))

    def resource(self, resource: Any) -> "Response":
        """A `Resource` or a plain dict."""
        obj = resource.object if isinstance(resource, Resource) else resource
        self._resources.append(json.dumps(obj))
        return self

    def status(self, key: str, value: Any) -> "Response":
        self._status[key] = value
        return self

    def event(self, reason: str, message: str, warning: bool = False) -> "Response":
        kind = _types.EventType.WARNING if warning else _types.EventType.NORMAL
        self._events.append(_types.Event(event_type=kind, reason=reason, message=message))
        return self

    def build(self) -> _types.Response:
        return _types.Response(
            outcome=self._outcome,
            resources=self._resources,
            status=json.dumps(self._status) if self._status else None,
            events=self._events,
        )


class KubeError(Exception):
    """A kube call that did not happen or did not succeed; `message` says why."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(KubeError):
    pass


class Forbidden(KubeError):
    """No capability grants the call, or the API server refused the component's account."""


class Rejected(KubeError):
    pass


class Unavailable(KubeError):
    pass


def _raised(error: Err) -> KubeError:
    value = error.value
    if isinstance(value, _kube.KubeError_NotFound):
        return NotFound("not found")
    if isinstance(value, _kube.KubeError_Forbidden):
        return Forbidden(value.value)
    if isinstance(value, _kube.KubeError_Rejected):
        return Rejected(value.value)
    return Unavailable(getattr(value, "value", str(value)))


class _Kube:
    """Reads and writes through the host, each checked against the Katalog's capabilities."""

    @staticmethod
    def _ref(api_version: str, kind: str, name: str, namespace: Optional[str]) -> _kube.ObjectRef:
        return _kube.ObjectRef(api_version=api_version, kind=kind, namespace=namespace, name=name)

    def get(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> Dict[str, Any]:
        try:
            return json.loads(_kube.get(self._ref(api_version, kind, name, namespace)))
        except Err as error:
            raise _raised(error) from None

    def list(
        self, api_version: str, kind: str, namespace: Optional[str] = None, label_selector: Optional[str] = None
    ) -> List[Dict[str, Any]]:
        try:
            return [json.loads(o) for o in _kube.list_objects(api_version, kind, namespace, label_selector)]
        except Err as error:
            raise _raised(error) from None

    def apply(self, obj: Any) -> Dict[str, Any]:
        obj = obj.object if isinstance(obj, Resource) else obj
        try:
            return json.loads(_kube.apply(json.dumps(obj)))
        except Err as error:
            raise _raised(error) from None

    def delete(self, api_version: str, kind: str, name: str, namespace: Optional[str] = None) -> None:
        try:
            _kube.delete(self._ref(api_version, kind, name, namespace))
        except Err as error:
            raise _raised(error) from None

    def patch_status(
        self, api_version: str, kind: str, name: str, status: Dict[str, Any], namespace: Optional[str] = None
    ) -> Dict[str, Any]:
        try:
            return json.loads(_kube.patch_status(self._ref(api_version, kind, name, namespace), json.dumps(status)))
        except Err as error:
            raise _raised(error) from None


class _Log:
    """Log lines the host writes as structured records (within the component's logBytes)."""

    def debug(self, message: str) -> None:
        _log.log(_log.Level.DEBUG, message)

    def info(self, message: str) -> None:
        _log.log(_log.Level.INFO, message)

    def warn(self, message: str) -> None:
        _log.log(_log.Level.WARN, message)

    def error(self, message: str) -> None:
        _log.log(_log.Level.ERROR, message)


kube = _Kube()
log = _Log()


class Hook:
    """Subclass and implement `on_reconcile`; the others default to doing nothing."""

    def on_reconcile(self, request: Request) -> Response:
        raise NotImplementedError

    def on_delete(self, request: Request) -> Response:
        return Response.ok()

    def on_not_found(self, request: Request) -> Response:
        return Response.ok()


def hooks(hook_class: type) -> type:
    """The `Hooks` export componentize-py calls, running `hook_class` (a `Hook`)."""
    hook = hook_class()

    def bridge(method: str):
        def call(self, raw: _types.Request) -> _types.Response:
            response = getattr(hook, method)(Request(raw))
            return response.build()

        return call

    return type(
        "Hooks",
        (exports.Hooks,),
        {name: bridge(name) for name in ("on_reconcile", "on_delete", "on_not_found")},
    )
