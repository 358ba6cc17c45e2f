// client-go's side of the informer-cache comparison with gpufleet (scripts/bench-cache.sh runs
// both alternately; tests/integration/kube/cache_bench.cc is the C++ side and prints the same
// RESULT line). A SharedInformerFactory Node informer with a transform that drops managedFields
// and status.images, as controller-runtime users configure it.
//
//	bench-client-go KUBECONFIG NODES UPDATES
//
// Syncs, prints READY with the memory figures taken, waits for UPDATES update events (the script
// drives them with `kube_cache_bench churn`), and prints the RESULT line.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const selector = "gpufleet.io/bench=cache"

// procStatusBytes reads VmRSS or VmHWM of this process.
func procStatusBytes(field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, field+":") {
			parts := strings.Fields(line[len(field)+1:])
			kb, _ := strconv.ParseUint(parts[0], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func heapInUse() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// trim is the transform: what is cached is the same as gpufleet's pruned Node.
func trim(obj interface{}) (interface{}, error) {
	if n, ok := obj.(*corev1.Node); ok {
		n.ManagedFields = nil
		n.Status.Images = nil
	}
	return obj, nil
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "bench-client-go: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: bench-client-go KUBECONFIG NODES UPDATES")
		os.Exit(2)
	}
	nodes, err1 := strconv.Atoi(os.Args[2])
	updates, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil {
		fail("NODES and UPDATES must be integers")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	cfg.QPS = -1 // no client-side rate limit, as the C++ side
	// client-go v0.32 asks for JSON unless told otherwise; BENCH_PROTOBUF=1 asks for protobuf.
	impl := "client-go"
	if os.Getenv("BENCH_PROTOBUF") != "" {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		impl = "client-go-pb"
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail("%v", err)
	}
	heapBefore := heapInUse()
	rssStart := procStatusBytes("VmRSS") // the process before its cache (fixed costs)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }),
		informers.WithTransform(trim))
	inf := factory.Core().V1().Nodes().Informer()
	var seen atomic.Int64
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) { seen.Add(1) },
	})
	stop := make(chan struct{})
	start := time.Now()
	syncCPU0 := cpuSeconds()
	factory.Start(stop)
	// HasSynced polled every millisecond, not cache.WaitForCacheSync: that polls every 100 ms,
	// which would add up to 100 ms to client-go's figure (gpufleet's wait_for_sync is woken by
	// the sync itself).
	syncDeadline := time.Now().Add(10 * time.Minute)
	for !inf.HasSynced() {
		if time.Now().After(syncDeadline) {
			fail("no sync")
		}
		time.Sleep(time.Millisecond)
	}
	syncS := time.Since(start).Seconds()
	syncCPU := cpuSeconds() - syncCPU0 // this process's CPU only: the API server's is not in it
	if got := len(inf.GetStore().ListKeys()); got != nodes {
		fail("%d Nodes cached, expected %d", got, nodes)
	}
	peak := procStatusBytes("VmHWM")
	heap := heapInUse() - heapBefore // GC + FreeOSMemory: freed memory returned to the OS
	rss := procStatusBytes("VmRSS")
	fmt.Println("READY")
	cpu0 := cpuSeconds()
	deadline := time.Now().Add(120 * time.Second) // as the C++ side
	for seen.Load() < int64(updates) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cpu := cpuSeconds() - cpu0
	close(stop)
	cpuText := "na"
	if seen.Load() >= int64(updates) {
		cpuText = strconv.FormatFloat(cpu*1e6/float64(updates), 'f', 1, 64)
	} else {
		fmt.Fprintf(os.Stderr, "bench-client-go: %d of %d updates seen\n", seen.Load(), updates)
	}
	fmt.Printf("RESULT impl=%s nodes=%d sync_s=%.3f sync_cpu_s=%.3f heap_B_per_node=%.0f "+
		"rss_start_MB=%.1f rss_MB=%.1f peak_rss_MB=%.1f peak_over_steady=%.2f "+
		"cpu_ms_per_1000_updates=%s updates_seen=%d\n",
		impl, nodes, syncS, syncCPU, float64(heap)/float64(nodes), float64(rssStart)/1e6,
		float64(rss)/1e6, float64(peak)/1e6,
		float64(peak)/float64(rss), cpuText, seen.Load())
}
