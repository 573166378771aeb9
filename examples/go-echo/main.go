// The echo hook of the host's per-call benchmark, in Go: the same work as the Rust
// `echo-hook` (a typed parse of the custom resource that reads only `spec.mode`, echoed
// into the status), so the languages are compared on one job.
package main

import orkestra "github.com/orkestra-rs/orkestra-rs/guest-sdk/go"

type cr struct {
	Spec struct {
		Mode string `json:"mode"`
	} `json:"spec"`
}

func onReconcile(request *orkestra.Request) *orkestra.Response {
	var object cr
	if err := request.Parse(&object); err != nil {
		return orkestra.Error("Unreadable", err.Error())
	}
	return orkestra.Ok().Status("mode", object.Spec.Mode)
}

func init() {
	orkestra.Export(orkestra.Hooks{OnReconcile: onReconcile})
}

func main() {}
