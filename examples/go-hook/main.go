// A hook for the go-notes Katalog, in Go (Go's own wasip1 target, made a component with
// `ork component new`): each Note gets a ConfigMap holding its text in the case its spec
// asks for, signed with the namespace's optional `note-defaults` ConfigMap (read through the
// host), and the status says how long the text is. The same contract as the TypeScript hook
// in ../js-hook.
package main

import (
	"fmt"
	"strings"

	orkestra "github.com/orkestra-rs/orkestra-rs/guest-sdk/go"
)

var cases = map[string]func(string) string{
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	"as":    func(text string) string { return text },
}

func onReconcile(request *orkestra.Request) *orkestra.Response {
	spec := request.Spec()
	text := orkestra.String(spec, "text")
	style := orkestra.String(spec, "case")
	if style == "" {
		style = "as"
	}
	if style == "panic" {
		// For the host's tests: a panic traps the instance, and Ready says why.
		panic("asked to panic")
	}
	change, ok := cases[style]
	if !ok {
		return orkestra.Error("UnknownCase", fmt.Sprintf("case %q is not one of upper, lower, as", style))
	}
	signature := ""
	defaults, err := orkestra.Get(orkestra.Ref{APIVersion: "v1", Kind: "ConfigMap", Name: "note-defaults"})
	switch {
	case err == nil:
		signature = orkestra.String(defaults, "data", "signature")
	case !orkestra.IsNotFound(err):
		return orkestra.Error("DefaultsUnreadable", err.Error())
	}
	body := change(text)
	if signature != "" {
		body += "\n-- " + signature
	}
	orkestra.Debugf("%s: %d characters", request.Key(), len(body))
	note := orkestra.NewResource("v1", "ConfigMap", request.Name()+"-note").
		Label("app", "notes").
		Field("data", map[string]string{"text": body})
	return orkestra.Ok().
		Resource(note).
		Status("length", len(body)).
		Status("renderedBy", "go-hook").
		Event("Written", fmt.Sprintf("wrote %d characters", len(body)))
}

func init() {
	orkestra.Export(orkestra.Hooks{OnReconcile: onReconcile})
}

// A reactor: the host calls the exports; main never runs.
func main() {}
