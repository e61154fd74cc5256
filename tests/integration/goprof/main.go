// goprof runs a small service-like workload for Hearth's integration tests.
// Standard library only.
//
//	goprof DIR          writes cpu, heap, allocs, mutex, block and goroutine profiles into DIR
//	                    (and heap/mutex/block.prev.pb.gz, taken 1.5 s earlier)
//	goprof serve ADDR   serves net/http/pprof on ADDR (a scrape target) until killed; every
//	                    /debug/pprof/ answer is kept: /served lists them (path, query, start
//	                    and end in unix ns), /served/body?i=N returns the N-th body
//	goprof spans FILE   writes a 2 s CPU profile to FILE whose work runs in 8 spans one after
//	                    another, labelled span_id and span_name as pyroscope-go's OpenTelemetry
//	                    integration labels them, beside unlabelled background work
//	goprof split-spans FILE
//	                    the same, but each span's first half runs labelled worker=a and its
//	                    second half worker=b: one span's samples in two series
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

var sink []byte

func hashLoop(stop <-chan struct{}) {
	buf := make([]byte, 4096)
	for {
		select {
		case <-stop:
			return
		default:
		}
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
}

func jsonLoop(stop <-chan struct{}) {
	type rec struct {
		ID   int               `json:"id"`
		Tags map[string]string `json:"tags"`
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		recs := make([]rec, 64)
		for j := range recs {
			recs[j] = rec{ID: i + j, Tags: map[string]string{"k": fmt.Sprint(j)}}
		}
		b, _ := json.Marshal(recs)
		sink = b
		var out []rec
		_ = json.Unmarshal(b, &out)
		keys := make([]string, 0, 256)
		for j := 0; j < 256; j++ {
			keys = append(keys, fmt.Sprintf("%08d", (j*7919)%1000))
		}
		sort.Strings(keys)
	}
}

func contend(stop <-chan struct{}) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				time.Sleep(200 * time.Microsecond)
				mu.Unlock()
			}
		}()
	}
	ch := make(chan int)
	go func() {
		for {
			select {
			case <-stop:
				return
			case ch <- 1:
			}
		}
	}()
	for {
		select {
		case <-stop:
			wg.Wait()
			return
		case <-ch:
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func write(dir, name string, fn func(f *os.File) error) {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		panic(err)
	}
	if err := fn(f); err != nil {
		panic(err)
	}
	f.Close()
}

type served struct {
	Path  string `json:"path"`
	Query string `json:"query"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	body  []byte
}

var (
	servedMu  sync.Mutex
	servedLog []served
)

type recorder struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.buf.Write(b)
	return r.ResponseWriter.Write(b)
}

// record keeps what each profile request was answered and when, so a test can compare
// what a scraper stored with what the target sent it.
func record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/debug/pprof/") || req.URL.Path == "/debug/pprof/" {
			h.ServeHTTP(w, req)
			return
		}
		start := time.Now().UnixNano()
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, req)
		servedMu.Lock()
		servedLog = append(servedLog, served{req.URL.Path, req.URL.RawQuery, start, time.Now().UnixNano(), rec.buf.Bytes()})
		servedMu.Unlock()
	})
}

func serveLog(w http.ResponseWriter, req *http.Request) {
	servedMu.Lock()
	defer servedMu.Unlock()
	if req.URL.Path == "/served/body" {
		i, err := strconv.Atoi(req.URL.Query().Get("i"))
		if err != nil || i < 0 || i >= len(servedLog) {
			http.Error(w, "no such answer", http.StatusNotFound)
			return
		}
		w.Write(servedLog[i].body)
		return
	}
	json.NewEncoder(w).Encode(servedLog)
}

// spans runs eight 250 ms spans under pprof labels, as otel-profiling-go does for each
// root span, while hashLoop keeps running outside any span. With split, each span's
// halves run under worker=a and worker=b.
func spans(path string, split bool) {
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	bg := make(chan struct{})
	go hashLoop(bg)
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("%016x", uint64(0x00000c0ffee00000)+uint64(i)*0x1111)
		// Eight spans of three traces (span i in trace i % 3), as an app that labels its
		// samples with the trace id too (otel-profiling-go sets span_id and span_name).
		trace := fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e47%02x", i%3)
		labels := pprof.Labels("span_id", id, "span_name", "GET /work", "trace_id", trace)
		pprof.Do(context.Background(), labels, func(ctx context.Context) {
			if !split {
				work(250 * time.Millisecond)
				return
			}
			for _, w := range []string{"a", "b"} {
				pprof.Do(ctx, pprof.Labels("worker", w), func(context.Context) { work(125 * time.Millisecond) })
			}
		})
	}
	close(bg)
	pprof.StopCPUProfile()
	f.Close()
}

// work runs jsonLoop for d.
func work(d time.Duration) {
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	jsonLoop(stop)
}

func main() {
	if os.Args[1] == "spans" || os.Args[1] == "split-spans" {
		spans(os.Args[2], os.Args[1] == "split-spans")
		return
	}
	runtime.MemProfileRate = 4096
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	stop := make(chan struct{})
	go hashLoop(stop)
	go jsonLoop(stop)
	go contend(stop)
	if os.Args[1] == "serve" {
		http.HandleFunc("/served", serveLog)
		http.HandleFunc("/served/body", serveLog)
		panic(http.ListenAndServe(os.Args[2], record(http.DefaultServeMux)))
	}
	dir := os.Args[1]
	// Earlier snapshots of the cumulative profiles, for prev_profile uploads.
	time.Sleep(300 * time.Millisecond)
	for _, p := range []string{"heap", "mutex", "block"} {
		write(dir, p+".prev.pb.gz", func(f *os.File) error { return pprof.Lookup(p).WriteTo(f, 0) })
	}
	write(dir, "cpu.pb.gz", func(f *os.File) error {
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		time.Sleep(1500 * time.Millisecond)
		pprof.StopCPUProfile()
		return nil
	})
	for _, p := range []string{"heap", "allocs", "mutex", "block", "goroutine"} {
		write(dir, p+".pb.gz", func(f *os.File) error { return pprof.Lookup(p).WriteTo(f, 0) })
	}
	close(stop)
}
