package orkestra

import (
	"encoding/json"
	"errors"
)

// Ref names one object. An empty Namespace means the custom resource's own namespace (or
// none, for a cluster-scoped kind).
type Ref struct {
	APIVersion, Kind, Namespace, Name string
}

// KubeError is a kube call that did not happen or did not succeed. Kind is forbidden (no
// capability grants it; Message names the grant), not-found, rejected (the API server's
// message) or unavailable (the server, or the call's budget of kube calls or bytes).
type KubeError struct {
	Kind, Message string
}

func (e *KubeError) Error() string {
	if e.Message == "" {
		return e.Kind
	}
	return e.Kind + ": " + e.Message
}

// IsNotFound tells whether err is a kube call's not-found.
func IsNotFound(err error) bool {
	var kube *KubeError
	return errors.As(err, &kube) && kube.Kind == "not-found"
}

// Get reads one object (verb get).
func Get(ref Ref) (map[string]any, error) {
	text, err := kubeGet(ref)
	if err != nil {
		return nil, err
	}
	return decode(text)
}

// List reads the objects of a kind in a namespace ("" for the custom resource's), optionally
// filtered by a label selector (verb list).
func List(apiVersion, kind, namespace, labelSelector string) ([]map[string]any, error) {
	texts, err := kubeList(apiVersion, kind, namespace, labelSelector)
	if err != nil {
		return nil, err
	}
	objects := make([]map[string]any, 0, len(texts))
	for _, text := range texts {
		object, err := decode(text)
		if err != nil {
			return nil, err
		}
		objects = append(objects, object)
	}
	return objects, nil
}

// Apply server-side applies an object under the component's own field manager and returns
// it as stored (verb apply).
func Apply(object any) (map[string]any, error) {
	text, err := json.Marshal(object)
	if err != nil {
		return nil, err
	}
	stored, err := kubeApply(string(text))
	if err != nil {
		return nil, err
	}
	return decode(stored)
}

// Delete deletes one object (verb delete).
func Delete(ref Ref) error { return kubeDelete(ref) }

// PatchStatus merges status into another object's `.status` (verb patch-status).
func PatchStatus(ref Ref, status any) (map[string]any, error) {
	text, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	stored, err := kubePatchStatus(ref, string(text))
	if err != nil {
		return nil, err
	}
	return decode(stored)
}

func decode(text string) (map[string]any, error) {
	var object map[string]any
	if err := json.Unmarshal([]byte(text), &object); err != nil {
		return nil, &KubeError{Kind: "unavailable", Message: "the host returned an object that is not JSON: " + err.Error()}
	}
	return object, nil
}
