package orkestra

import (
	"encoding/json"
	"strings"
)

// GVK is the group, version and kind of the custom resource (Group is empty for the core group).
type GVK struct {
	Group, Version, Kind string
}

// Request is one reconcile of one custom resource. The object and the context are parsed
// on first use, so a hook that reads only the key pays for no JSON.
type Request struct {
	key        string
	gvk        GVK
	target     *string
	object     *string
	eventID    *uint64
	sentinels  []string
	contextRaw string

	parsed  map[string]any
	context map[string]any
}

// Key is `namespace/name`, or `name` for a cluster-scoped resource.
func (r *Request) Key() string { return r.key }

// Name is the custom resource's name.
func (r *Request) Name() string {
	return r.key[strings.LastIndexByte(r.key, '/')+1:]
}

// Namespace is the custom resource's namespace, empty when it is cluster-scoped.
func (r *Request) Namespace() string {
	namespace, _, found := strings.Cut(r.key, "/")
	if !found {
		return ""
	}
	return namespace
}

// GVK is the kind of the custom resource.
func (r *Request) GVK() GVK { return r.gvk }

// Target is the serve target the resource is routed through, if any.
func (r *Request) Target() (string, bool) {
	if r.target == nil {
		return "", false
	}
	return *r.target, true
}

// Sentinels names what caused this run, such as `generationChanged` or `create`.
func (r *Request) Sentinels() []string { return r.sentinels }

// EventID is set when the CRD keeps each admitted event as its own queue item.
func (r *Request) EventID() (uint64, bool) {
	if r.eventID == nil {
		return 0, false
	}
	return *r.eventID, true
}

// RawObject is the custom resource as JSON; false in OnNotFound.
func (r *Request) RawObject() (string, bool) {
	if r.object == nil {
		return "", false
	}
	return *r.object, true
}

// Parse decodes the custom resource into v (a struct of your own: only what it names is
// built, the fastest way to read a large CR).
func (r *Request) Parse(v any) error {
	raw, ok := r.RawObject()
	if !ok {
		raw = "{}"
	}
	return json.Unmarshal([]byte(raw), v)
}

// Object is the custom resource, parsed once (empty in OnNotFound or if it is not an object).
func (r *Request) Object() map[string]any {
	if r.parsed == nil {
		r.parsed = map[string]any{}
		if raw, ok := r.RawObject(); ok {
			_ = json.Unmarshal([]byte(raw), &r.parsed)
		}
	}
	return r.parsed
}

// Spec is the custom resource's `.spec` (empty when it has none).
func (r *Request) Spec() map[string]any { return field(r.Object(), "spec") }

// Status is the custom resource's `.status` (empty when it has none).
func (r *Request) Status() map[string]any { return field(r.Object(), "status") }

// Context is what the declarative pipeline knows: health, metrics, cross, external, args and,
// for hooks that run after the templates, children.
func (r *Request) Context() map[string]any {
	if r.context == nil {
		r.context = map[string]any{}
		_ = json.Unmarshal([]byte(r.contextRaw), &r.context)
	}
	return r.context
}

// Args are the Katalog's templated hook arguments.
func (r *Request) Args() map[string]any { return field(r.Context(), "args") }

// Children are the objects the templates applied (hooks that run after them).
func (r *Request) Children() map[string]any { return field(r.Context(), "children") }

// String reads a string at a path of object keys, such as ("spec", "text"); empty when absent
// or not a string.
func String(object map[string]any, path ...string) string {
	for i, key := range path {
		value, ok := object[key]
		if !ok {
			return ""
		}
		if i == len(path)-1 {
			text, _ := value.(string)
			return text
		}
		if object, ok = value.(map[string]any); !ok {
			return ""
		}
	}
	return ""
}

func field(object map[string]any, name string) map[string]any {
	if inner, ok := object[name].(map[string]any); ok {
		return inner
	}
	return map[string]any{}
}
