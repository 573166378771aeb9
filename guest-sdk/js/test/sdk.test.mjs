// Unit tests of the SDK's pure parts: what Response builds for the host, how Request reads
// the raw record, and how kube failures become KubeError.
//   node --import ./test/register.mjs --test test/sdk.test.mjs   (from guest-sdk/js)
import { test } from "node:test";
import assert from "node:assert/strict";

import { KubeError, Request, Resource, Response, hooks, kube, log } from "../index.js";
import { answerWith, calls, failNext } from "./host.mjs";

const raw = (fields) => ({ key: "team-a/web", gvk: { group: "demo.io", version: "v1", kind: "Site" }, sentinels: [], context: "{}", ...fields });

test("requeueAfter crosses as a whole, non-negative number of milliseconds", () => {
  assert.deepEqual(Response.requeueAfter(1500.4).build().outcome, { tag: "requeue-after", val: 1500 });
  assert.deepEqual(Response.requeueAfter(-5).build().outcome, { tag: "requeue-after", val: 0 });
  assert.equal(typeof Response.requeueAfter(10).build().outcome.val, "number", "a BigInt would trap in QuickJS");
});

test("a response carries its children and status as JSON text and its events as records", () => {
  const built = Response.ok()
    .resource(new Resource("v1", "ConfigMap", "web-page").namespace("team-a").label("app", "web").field("data", { a: "1" }))
    .resource({ apiVersion: "v1", kind: "Secret", metadata: { name: "s" } })
    .status("length", 3)
    .event("Written", "wrote it")
    .event("Odd", "careful", true)
    .build();
  assert.deepEqual(built.outcome, { tag: "ok" });
  assert.deepEqual(JSON.parse(built.resources[0]), {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "web-page", namespace: "team-a", labels: { app: "web" } },
    data: { a: "1" },
  });
  assert.equal(JSON.parse(built.resources[1]).kind, "Secret");
  assert.deepEqual(JSON.parse(built.status), { length: 3 });
  assert.deepEqual(built.events, [
    { eventType: "normal", reason: "Written", message: "wrote it" },
    { eventType: "warning", reason: "Odd", message: "careful" },
  ]);
});

test("no status field means no status, and an error carries its reason", () => {
  assert.equal(Response.ok().build().status, undefined);
  assert.deepEqual(Response.error("NoOne", "spec.who is empty").build().outcome, {
    tag: "error",
    val: { reason: "NoOne", message: "spec.who is empty" },
  });
});

test("a request reads the key, an absent target and the object once", () => {
  const request = new Request(raw({ target: null, object: '{"spec":{"who":"Ada"},"status":{"n":1}}' }));
  assert.equal(request.target, undefined, "QuickJS's null is an absent target");
  assert.equal(request.name, "web");
  assert.equal(request.namespace, "team-a");
  assert.equal(request.spec.who, "Ada");
  assert.equal(request.status.n, 1);
  assert.equal(request.object, request.object, "parsed once");
  assert.deepEqual(new Request(raw({ key: "cluster-wide" })).object, {}, "no object in onNotFound");
  assert.equal(new Request(raw({ key: "cluster-wide" })).namespace, undefined);
  const context = new Request(raw({ context: '{"args":{"greeting":"hi"},"children":{"x":1}}' }));
  assert.equal(context.args.greeting, "hi");
  assert.equal(context.children.x, 1);
});

test("kube calls parse what the host returns and throw KubeError with its kind", () => {
  answerWith('{"data":{"signature":"ops"}}');
  assert.equal(kube.get("v1", "ConfigMap", "note-defaults").data.signature, "ops");
  assert.deepEqual(calls.at(-1), { name: "get", args: [{ apiVersion: "v1", kind: "ConfigMap", namespace: undefined, name: "note-defaults" }] });
  assert.equal(kube.list("v1", "ConfigMap", "team-a").length, 2);
  failNext({ tag: "not-found" });
  assert.throws(
    () => kube.get("v1", "ConfigMap", "gone"),
    (error) => error instanceof KubeError && error.kind === "not-found",
  );
  failNext({ tag: "forbidden", val: "grant get on v1/ConfigMap" });
  assert.throws(
    () => kube.delete("v1", "ConfigMap", "x", "team-a"),
    (error) => error instanceof KubeError && error.kind === "forbidden" && error.message === "grant get on v1/ConfigMap",
  );
  kube.patchStatus("demo.io/v1", "Site", "web", { ok: true }, "team-a");
  assert.deepEqual(calls.at(-1).args[1], '{"ok":true}', "status goes as JSON text");
});

test("log lines go to the host at their level", () => {
  log.warn("careful");
  assert.deepEqual(calls.at(-1), { name: "log", args: ["warn", "careful"] });
});

test("hooks() wraps the handlers and answers ok for those not given", () => {
  const exported = hooks({
    onReconcile: (request) => Response.ok().status("who", request.spec.who),
  });
  const built = exported.onReconcile(raw({ object: '{"spec":{"who":"Ada"}}' }));
  assert.deepEqual(JSON.parse(built.status), { who: "Ada" });
  assert.deepEqual(exported.onDelete(raw({})).outcome, { tag: "ok" });
  assert.deepEqual(exported.onNotFound(raw({})).outcome, { tag: "ok" });
});
