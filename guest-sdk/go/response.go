package orkestra

import (
	"encoding/json"
	"time"
)

type outcome uint8

const (
	outcomeOk outcome = iota
	outcomeRequeue
	outcomeError
)

// EventType is Normal or Warning.
type EventType uint8

const (
	Normal EventType = iota
	Warning
)

// Event is a Kubernetes Event the host records on the custom resource.
type Event struct {
	Type            EventType
	Reason, Message string
}

// Response is what a hook returns: an outcome, children to apply, status fields and events.
// Build it by chaining: Ok().Resource(r).Status("length", 5).Event("Written", "...").
type Response struct {
	outcome         outcome
	requeueAfter    uint64
	reason, message string
	resources       []string
	status          map[string]any
	events          []Event
	// The first value that could not be encoded as JSON; the call then fails with it.
	invalid error
}

// Ok: done until the next event.
func Ok() *Response { return &Response{outcome: outcomeOk} }

// RequeueAfter runs the reconcile again after d (at least the Katalog's requeue.minInterval).
func RequeueAfter(d time.Duration) *Response {
	return &Response{outcome: outcomeRequeue, requeueAfter: uint64(d.Milliseconds())}
}

// Error fails the reconcile: Ready=False with this CamelCase reason, then a retry with
// backoff. The host records the events and applies nothing else.
func Error(reason, message string) *Response {
	return &Response{outcome: outcomeError, reason: reason, message: message}
}

// Resource adds a child the host applies (server-side apply, owned by the custom resource).
// Return every child on every call: one no longer returned is deleted where the Katalog grants it.
func (r *Response) Resource(object any) *Response {
	text, err := json.Marshal(object)
	if err != nil {
		r.fail(err)
		return r
	}
	r.resources = append(r.resources, string(text))
	return r
}

// Status sets one top-level field of the custom resource's `.status`.
func (r *Response) Status(field string, value any) *Response {
	if r.status == nil {
		r.status = map[string]any{}
	}
	r.status[field] = value
	return r
}

// Event records a Normal event on the custom resource.
func (r *Response) Event(reason, message string) *Response {
	r.events = append(r.events, Event{Normal, reason, message})
	return r
}

// Warning records a Warning event on the custom resource.
func (r *Response) Warning(reason, message string) *Response {
	r.events = append(r.events, Event{Warning, reason, message})
	return r
}

func (r *Response) fail(err error) {
	if r.invalid == nil {
		r.invalid = err
	}
}

// settled turns a response that could not be encoded into the error the host shows.
func (r *Response) settled() (*Response, *string) {
	if r.invalid != nil {
		return Error("InvalidResponse", r.invalid.Error()), nil
	}
	if r.status == nil {
		return r, nil
	}
	text, err := json.Marshal(r.status)
	if err != nil {
		return Error("InvalidResponse", "status: "+err.Error()), nil
	}
	status := string(text)
	return r, &status
}

// Object is a child object: a JSON object with apiVersion, kind and metadata.
type Object map[string]any

// NewResource starts a child of this kind and name; its namespace defaults to the custom
// resource's.
func NewResource(apiVersion, kind, name string) Object {
	return Object{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}
}

func (o Object) metadata() map[string]any { return o["metadata"].(map[string]any) }

// Namespace sets the child's namespace.
func (o Object) Namespace(namespace string) Object {
	o.metadata()["namespace"] = namespace
	return o
}

// Label sets one label.
func (o Object) Label(key, value string) Object { return o.entry("labels", key, value) }

// Annotation sets one annotation.
func (o Object) Annotation(key, value string) Object { return o.entry("annotations", key, value) }

// Field sets a top-level field such as "spec" or "data".
func (o Object) Field(name string, value any) Object {
	o[name] = value
	return o
}

func (o Object) entry(group, key, value string) Object {
	entries, ok := o.metadata()[group].(map[string]string)
	if !ok {
		entries = map[string]string{}
		o.metadata()[group] = entries
	}
	entries[key] = value
	return o
}
