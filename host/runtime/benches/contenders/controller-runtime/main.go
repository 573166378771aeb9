// A plain controller-runtime controller doing the converge benchmark's work, as a team
// would write it by hand: for each Item, a ConfigMap it owns (created or updated through
// the manager's cache) and a Ready condition on its status. Ten concurrent reconciles, every
// read from the manager's cache (limited to the benchmark's namespace; Items are read as
// unstructured objects, cached as a typed Item would be), no metrics or health listeners.
//
// Usage: controller-runtime NAMESPACE (KUBECONFIG names the cluster). Runs until stdin
// closes, then prints its peak resident set as peak_rss_kib=N. For the latency benchmark,
// BENCH_GROUP and BENCH_KINDS (comma separated) name other kinds, one controller each, and
// NAMESPACE "-" watches every namespace; BENCH_METRICS_ADDR serves its own /metrics there
// (its workqueue histograms).
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

type reconciler struct {
	client client.Client
	kind   schema.GroupVersionKind
}

// kinds are the converge benchmark's Item, or those BENCH_GROUP and BENCH_KINDS name.
func kinds() []schema.GroupVersionKind {
	group, names := os.Getenv("BENCH_GROUP"), os.Getenv("BENCH_KINDS")
	if group == "" || names == "" {
		return []schema.GroupVersionKind{{Group: "converge.orkestra.io", Version: "v1", Kind: "Item"}}
	}
	var found []schema.GroupVersionKind
	for _, name := range strings.Split(names, ",") {
		found = append(found, schema.GroupVersionKind{Group: group, Version: "v1", Kind: name})
	}
	return found
}

func (r *reconciler) Reconcile(ctx context.Context, request ctrl.Request) (ctrl.Result, error) {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(r.kind)
	if err := r.client.Get(ctx, request.NamespacedName, cr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	value, _, _ := unstructured.NestedString(cr.Object, "spec", "value")
	configMap := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cr.GetName(), Namespace: cr.GetNamespace()}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.client, configMap, func() error {
		configMap.Data = map[string]string{"value": value}
		return controllerutil.SetControllerReference(cr, configMap, r.client.Scheme())
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	generation := cr.GetGeneration()
	conditions, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	observed, _, _ := unstructured.NestedInt64(cr.Object, "status", "observedGeneration")
	ready := len(conditions) > 0 && conditions[0].(map[string]interface{})["status"] == "True"
	if ready && observed == generation {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(cr.DeepCopy())
	status := map[string]interface{}{
		"observedGeneration": generation,
		"conditions": []interface{}{map[string]interface{}{
			"type": "Ready", "status": "True", "reason": "ReconcileSucceeded", "message": "",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": generation,
		}},
	}
	if err := unstructured.SetNestedField(cr.Object, status, "status"); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.client.Status().Patch(ctx, cr, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: controller-runtime NAMESPACE")
		os.Exit(2)
	}
	namespace := os.Args[1]
	config := ctrl.GetConfigOrDie()
	config.UserAgent = "bench-controller-runtime"
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	cacheOptions := cache.Options{}
	if namespace != "-" {
		cacheOptions.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	metricsAddr := os.Getenv("BENCH_METRICS_ADDR")
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	manager, err := ctrl.NewManager(config, ctrl.Options{
		Scheme: scheme,
		Cache:  cacheOptions,
		// Reads of the Items come from the manager's cache, as they would for a typed Item.
		Client:                 client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		panic(err)
	}
	for _, kind := range kinds() {
		primary := &unstructured.Unstructured{}
		primary.SetGroupVersionKind(kind)
		err = ctrl.NewControllerManagedBy(manager).
			Named(strings.ToLower(kind.Kind)).
			For(primary).
			Owns(&corev1.ConfigMap{}).
			WithOptions(controller.Options{MaxConcurrentReconciles: 10}).
			Complete(&reconciler{client: manager.GetClient(), kind: kind})
		if err != nil {
			panic(err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		// Runs until its parent closes stdin.
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
		}
		stop()
	}()
	if err := manager.Start(ctx); err != nil {
		panic(err)
	}
	fmt.Printf("peak_rss_kib=%d\n", peakRSS())
}

// peakRSS is VmHWM from /proc/self/status, in KiB.
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kib)
			return kib
		}
	}
	return 0
}
