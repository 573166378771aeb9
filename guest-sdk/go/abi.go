//go:build wasip1

package orkestra

// The canonical ABI of the orkestra:operator@0.1.0 hook world, written out by hand: Go's
// wasip1 port passes only numbers and pointers across the boundary, so records are read
// from and written to linear memory at the offsets the component model lays them out at
// (wasm32: 4-byte pointers and lengths). Memory handed to the host is kept until the next
// call into the instance has read its request: by then the host has read it.

import (
	"encoding/binary"
	"unsafe"
)

// pinned keeps what the host reads after a call returns, and what it allocated through
// cabi_realloc, reachable: Go's collector does not move objects, only frees them. An instance
// may serve several calls (instances.reuse: warm), so each call starts it afresh.
var pinned [][]byte

// Where each record's fields lie in linear memory (wasm32), as the component model's
// canonical ABI lays the world's records out: `<record><Field>` is a field's offset and
// `<record>Size` the record's size. The host's tests compute the same from wit/
// (host/wasm/tests/guest_sdks.rs), so a WIT change that moves a field fails there first.
const (
	requestSize      = 88
	requestKey       = 0
	requestGvk       = 8
	requestTarget    = 32
	requestObject    = 44
	requestEventID   = 56
	requestSentinels = 72
	requestContext   = 80

	gvkSize    = 24
	gvkGroup   = 0
	gvkVersion = 8
	gvkKind    = 16

	responseSize      = 56
	responseOutcome   = 0
	responseResources = 24
	responseStatus    = 32
	responseEvents    = 44

	failureSize    = 16
	failureReason  = 0
	failureMessage = 8

	eventSize      = 20
	eventEventType = 0
	eventReason    = 4
	eventMessage   = 12

	// A string or list is (pointer, length); an option's or variant's payload follows its
	// discriminant at its alignment.
	stringSize       = 8
	outcomePayload   = 8
	optionString     = 4
	optionU64        = 8
	kubeResultSize   = 16
	kubeResultOk     = 4
	kubeErrorPayload = 4
)

// The response record is returned through this area (align 8).
var returnArea [responseSize / 8]uint64

func memory(p, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Add(nil, uintptr(p))), n)
}

func address[T any](p *T) uint32 { return uint32(uintptr(unsafe.Pointer(p))) }

func load32(p uint32) uint32 { return binary.LittleEndian.Uint32(memory(p, 4)) }

func load64(p uint32) uint64 { return binary.LittleEndian.Uint64(memory(p, 8)) }

func store32(p, v uint32) { binary.LittleEndian.PutUint32(memory(p, 4), v) }

// loadString copies the string whose pointer and length are at p.
func loadString(p uint32) string { return string(memory(load32(p), load32(p+4))) }

// loadOption reads an option<string> at p (discriminant, then the string).
func loadOption(p uint32) *string {
	if memory(p, 1)[0] == 0 {
		return nil
	}
	text := loadString(p + optionString)
	return &text
}

func loadStrings(p uint32) []string {
	base, n := load32(p), load32(p+4)
	list := make([]string, n)
	for i := range list {
		list[i] = loadString(base + uint32(i)*stringSize)
	}
	return list
}

// lowered is a Go string as the host reads it: its bytes, kept alive, and their address.
func lowered(text string) (uint32, uint32) {
	if text == "" {
		return 0, 0
	}
	bytes := []byte(text)
	pinned = append(pinned, bytes)
	return address(&bytes[0]), uint32(len(bytes))
}

func storeString(p uint32, text string) {
	ptr, n := lowered(text)
	store32(p, ptr)
	store32(p+4, n)
}

// block is zeroed, 4-aligned memory of n bytes the host reads after the call.
func block(n int) uint32 {
	if n == 0 {
		return 0
	}
	words := make([]uint32, (n+3)/4)
	pinned = append(pinned, unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*4))
	return address(&words[0])
}

// The host calls cabi_realloc while it writes a request or a kube call's answer into the
// instance, when the guest may not call imports, and Go's allocator reads the clock (an
// import) when it takes a span the scavenger returned: in an instance that has served calls
// before, an allocation there can trap. So cabi_realloc serves from an arena taken while
// imports were allowed, and only what does not fit comes from Go's heap. After each call
// the arena is empty again, grown to what the call needed, up to maxHostArena.
var (
	hostArena = make([]byte, 64<<10)
	// Bytes of the arena handed out in this call, and asked for (fitting or not).
	hostArenaUsed, hostArenaWanted uint32
)

const maxHostArena = 8 << 20

//go:wasmexport cabi_realloc
func cabiRealloc(old, oldSize, align, newSize uint32) uint32 {
	if newSize == 0 {
		return align
	}
	hostArenaWanted = min(hostArenaWanted+newSize+align, maxHostArena)
	start := address(&hostArena[0])
	at := (start + hostArenaUsed + align - 1) &^ (align - 1)
	var aligned uint32
	if uint64(at)+uint64(newSize) <= uint64(start)+uint64(len(hostArena)) {
		hostArenaUsed = at + newSize - start
		aligned = at
	} else {
		buffer := make([]byte, newSize+align)
		pinned = append(pinned, buffer)
		aligned = (address(&buffer[0]) + align - 1) &^ (align - 1)
	}
	if old != 0 {
		copy(memory(aligned, newSize), memory(old, min(oldSize, newSize)))
	}
	return aligned
}

// readyArena empties the arena for the next call, grown first if this call did not fit.
func readyArena() {
	if wanted := int(hostArenaWanted); wanted > len(hostArena) {
		hostArena = make([]byte, min(2*wanted, maxHostArena))
	}
	hostArenaUsed, hostArenaWanted = 0, 0
}

// request reads the request record at p.
func request(p uint32) *Request {
	gvk := p + requestGvk
	r := &Request{
		key:        loadString(p + requestKey),
		gvk:        GVK{loadString(gvk + gvkGroup), loadString(gvk + gvkVersion), loadString(gvk + gvkKind)},
		target:     loadOption(p + requestTarget),
		object:     loadOption(p + requestObject),
		sentinels:  loadStrings(p + requestSentinels),
		contextRaw: loadString(p + requestContext),
	}
	if memory(p+requestEventID, 1)[0] != 0 {
		id := load64(p + requestEventID + optionU64)
		r.eventID = &id
	}
	return r
}

// respond writes the response record into the return area and returns its address.
func respond(r *Response) uint32 {
	r, status := r.settled()
	p := address(&returnArea[0])
	clear(memory(p, responseSize))
	outcome := p + responseOutcome
	memory(outcome, 1)[0] = byte(r.outcome)
	switch r.outcome {
	case outcomeRequeue:
		binary.LittleEndian.PutUint64(memory(outcome+outcomePayload, 8), r.requeueAfter)
	case outcomeError:
		storeString(outcome+outcomePayload+failureReason, r.reason)
		storeString(outcome+outcomePayload+failureMessage, r.message)
	}
	resources := block(len(r.resources) * stringSize)
	for i, text := range r.resources {
		storeString(resources+uint32(i)*stringSize, text)
	}
	store32(p+responseResources, resources)
	store32(p+responseResources+4, uint32(len(r.resources)))
	if status != nil {
		memory(p+responseStatus, 1)[0] = 1
		storeString(p+responseStatus+optionString, *status)
	}
	events := block(len(r.events) * eventSize)
	for i, event := range r.events {
		at := events + uint32(i)*eventSize
		memory(at+eventEventType, 1)[0] = byte(event.Type)
		storeString(at+eventReason, event.Reason)
		storeString(at+eventMessage, event.Message)
	}
	store32(p+responseEvents, events)
	store32(p+responseEvents+4, uint32(len(r.events)))
	return p
}

func serve(handler func(*Request) *Response, p uint32) uint32 {
	// The request is copied out of the memory the host wrote it to; what the last call
	// handed the host has been read. Kept, it would grow the heap call after call, and a
	// heap that grows makes cabi_realloc reach for the clock, an import it may not call.
	req := request(p)
	pinned = nil
	// The answer lies in Go's heap, not the arena: the arena is free for the next call.
	defer readyArena()
	if handler == nil {
		return respond(Ok())
	}
	defer func() {
		// Logged first so the custom resource's Ready message says why the instance trapped.
		if cause := recover(); cause != nil {
			Errorf("panic: %v", cause)
			panic(cause)
		}
	}()
	return respond(handler(req))
}

//go:wasmexport orkestra:operator/hooks@0.1.0#on-reconcile
func onReconcile(p uint32) uint32 { return serve(exported.OnReconcile, p) }

//go:wasmexport orkestra:operator/hooks@0.1.0#on-delete
func onDelete(p uint32) uint32 { return serve(exported.OnDelete, p) }

//go:wasmexport orkestra:operator/hooks@0.1.0#on-not-found
func onNotFound(p uint32) uint32 { return serve(exported.OnNotFound, p) }

//go:wasmimport orkestra:operator/log@0.1.0 log
func hostLog(level, ptr, n uint32)

func writeLog(level Level, message string) {
	ptr, n := lowered(message)
	hostLog(uint32(level), ptr, n)
}

//go:wasmimport orkestra:operator/kube@0.1.0 get
func hostGet(apiVersion, apiVersionLen, kind, kindLen, hasNamespace, namespace, namespaceLen, name, nameLen, result uint32)

//go:wasmimport orkestra:operator/kube@0.1.0 list-objects
func hostList(apiVersion, apiVersionLen, kind, kindLen, hasNamespace, namespace, namespaceLen, hasSelector, selector, selectorLen, result uint32)

//go:wasmimport orkestra:operator/kube@0.1.0 apply
func hostApply(object, objectLen, result uint32)

//go:wasmimport orkestra:operator/kube@0.1.0 delete
func hostDelete(apiVersion, apiVersionLen, kind, kindLen, hasNamespace, namespace, namespaceLen, name, nameLen, result uint32)

//go:wasmimport orkestra:operator/kube@0.1.0 patch-status
func hostPatchStatus(apiVersion, apiVersionLen, kind, kindLen, hasNamespace, namespace, namespaceLen, name, nameLen, status, statusLen, result uint32)

// kubeResult is the result<T, kube-error> a kube import writes.
type kubeResult [kubeResultSize / 4]uint32

func (k *kubeResult) at() uint32 { return address(&k[0]) }

// failed is the call's kube-error, or nil when it succeeded.
func (k *kubeResult) failed() error {
	p := k.at()
	if memory(p, 1)[0] == 0 {
		return nil
	}
	kinds := [...]string{"forbidden", "not-found", "rejected", "unavailable"}
	kind := memory(p+kubeResultOk, 1)[0]
	if int(kind) >= len(kinds) {
		return &KubeError{Kind: "unavailable", Message: "the host returned an unknown kube error"}
	}
	err := &KubeError{Kind: kinds[kind]}
	if err.Kind != "not-found" {
		err.Message = loadString(p + kubeResultOk + kubeErrorPayload)
	}
	return err
}

func (k *kubeResult) text() string { return loadString(k.at() + kubeResultOk) }

func (k *kubeResult) texts() []string { return loadStrings(k.at() + kubeResultOk) }

func option(text string) (uint32, uint32, uint32) {
	if text == "" {
		return 0, 0, 0
	}
	ptr, n := lowered(text)
	return 1, ptr, n
}

func (ref Ref) lowered() (a, an, k, kn, has, ns, nsn, name, namen uint32) {
	a, an = lowered(ref.APIVersion)
	k, kn = lowered(ref.Kind)
	has, ns, nsn = option(ref.Namespace)
	name, namen = lowered(ref.Name)
	return
}

func kubeGet(ref Ref) (string, error) {
	var result kubeResult
	a, an, k, kn, has, ns, nsn, name, namen := ref.lowered()
	hostGet(a, an, k, kn, has, ns, nsn, name, namen, result.at())
	if err := result.failed(); err != nil {
		return "", err
	}
	return result.text(), nil
}

func kubeList(apiVersion, kind, namespace, selector string) ([]string, error) {
	var result kubeResult
	a, an := lowered(apiVersion)
	k, kn := lowered(kind)
	has, ns, nsn := option(namespace)
	hasSelector, s, sn := option(selector)
	hostList(a, an, k, kn, has, ns, nsn, hasSelector, s, sn, result.at())
	if err := result.failed(); err != nil {
		return nil, err
	}
	return result.texts(), nil
}

func kubeApply(object string) (string, error) {
	var result kubeResult
	ptr, n := lowered(object)
	hostApply(ptr, n, result.at())
	if err := result.failed(); err != nil {
		return "", err
	}
	return result.text(), nil
}

func kubeDelete(ref Ref) error {
	var result kubeResult
	a, an, k, kn, has, ns, nsn, name, namen := ref.lowered()
	hostDelete(a, an, k, kn, has, ns, nsn, name, namen, result.at())
	return result.failed()
}

func kubePatchStatus(ref Ref, status string) (string, error) {
	var result kubeResult
	a, an, k, kn, has, ns, nsn, name, namen := ref.lowered()
	ptr, n := lowered(status)
	hostPatchStatus(a, an, k, kn, has, ns, nsn, name, namen, ptr, n, result.at())
	if err := result.failed(); err != nil {
		return "", err
	}
	return result.text(), nil
}

// adapterArena is memory Go's allocator never hands out (it lies in the module's static
// data), for the WASI preview1 adapter's state and stack: the adapter takes them at the
// first WASI call of Go's runtime start, before Go could serve an allocation, and memory
// it grew itself would later be handed out by Go again. `ork component new` finds the
// arena by its marker and gives the component a `cabi_realloc_adapter` that serves from it.
var adapterArena = [arenaSize]byte{'o', 'r', 'k', 'e', 's', 't', 'r', 'a', ':', 'a', 'd', 'a', 'p', 't', 'e', 'r', '-', 'a', 'r', 'e', 'n', 'a', '/', '1'}

const arenaSize = 256 << 10

// keepArena stops the linker from dropping the arena, which no Go code reads.
//
//go:wasmexport orkestra_adapter_arena
func keepArena() uint32 { return address(&adapterArena[0]) }
