package orkestra

// Hooks are the functions the host calls; OnDelete and OnNotFound default to Ok.
type Hooks struct {
	// Each reconcile of a live custom resource.
	OnReconcile func(*Request) *Response
	// Once per reconcile while the custom resource is being deleted, before the finalizer
	// goes; an error or a requeue keeps the finalizer for another try.
	OnDelete func(*Request) *Response
	// The custom resource was gone when its turn came; returned resources are ignored.
	OnNotFound func(*Request) *Response
}

var exported Hooks

// Export registers the component's hooks. Call it from an init function of package main.
func Export(hooks Hooks) { exported = hooks }
