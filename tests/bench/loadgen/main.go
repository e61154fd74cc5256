// loadgen: the benchmark's agents, in Go so that the measured tail is the server's and
// not a Python client's (GIL, thread switches).
//
// Each agent owns one keep-alive connection and pushes one profile per -interval,
// the agents' schedules spread evenly over the interval as a real fleet's are. With
// -interval 0 each agent pushes back to back until -count uploads are done (the
// throughput benchmark). An optional querier merges the last five minutes in a loop.
// Bodies are the files in -bodies (gzipped pprof), taken in turn. The report is one
// JSON object on stdout: upload and query latencies, errors by kind, and the client's
// own CPU seconds, so a reader can see whether the client kept up.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type result struct {
	Uploads      int            `json:"uploads"`
	Seconds      float64        `json:"seconds"`
	PerSecond    float64        `json:"per_second"`
	P50ms        float64        `json:"p50_ms"`
	P99ms        float64        `json:"p99_ms"`
	P999ms       float64        `json:"p999_ms"`
	MaxMs        float64        `json:"max_ms"`
	Errors       map[string]int `json:"errors"`
	Queries      int            `json:"queries"`
	QueryP50ms   float64        `json:"query_p50_ms"`
	QueryP99ms   float64        `json:"query_p99_ms"`
	ClientCPUSec float64        `json:"client_cpu_seconds"`
	Late         int            `json:"late"` // uploads sent more than one interval behind schedule
}

type recorder struct {
	mu     sync.Mutex
	lat    []time.Duration
	qlat   []time.Duration
	errors map[string]int
	late   int
}

func (r *recorder) add(d time.Duration, err string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != "" {
		r.errors[err]++
		return
	}
	r.lat = append(r.lat, d)
}

func (r *recorder) addQuery(d time.Duration, err string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != "" {
		r.errors["query "+err]++
		return
	}
	r.qlat = append(r.qlat, d)
}

func pct(xs []time.Duration, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(p / 100 * float64(len(xs)))
	if i >= len(xs) {
		i = len(xs) - 1
	}
	return float64(xs[i]) / 1e6
}

// One request; "" or the error's kind ("status 429", "connection").
func do(c *http.Client, req *http.Request) string {
	resp, err := c.Do(req)
	if err != nil {
		return "connection"
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Sprintf("status %d", resp.StatusCode)
	}
	if err != nil {
		return "connection"
	}
	return ""
}

func newClient() *http.Client {
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, DisableCompression: true}}
}

type config struct {
	addr, name string
	agents     int
	interval   time.Duration
	seconds    time.Duration
	count      int64
	bodies     [][]byte
}

func agent(cfg *config, a int, rec *recorder, start time.Time, next *int64) {
	c := newClient()
	stop := start.Add(cfg.seconds)
	due := start
	if cfg.interval > 0 {
		due = start.Add(cfg.interval * time.Duration(a) / time.Duration(cfg.agents))
	}
	for i := a; ; i += cfg.agents {
		if cfg.interval > 0 {
			if !due.Before(stop) {
				return
			}
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			} else if -d > cfg.interval {
				rec.mu.Lock()
				rec.late++
				rec.mu.Unlock()
			}
			due = due.Add(cfg.interval)
		} else if atomic.AddInt64(next, 1) > cfg.count {
			return
		}
		q := url.Values{"name": {fmt.Sprintf("%s{agent=%d}", cfg.name, a)}, "format": {"pprof"},
			"from": {fmt.Sprint(time.Now().UnixNano() + int64(a))}}
		req, _ := http.NewRequest("POST", "http://"+cfg.addr+"/ingest?"+q.Encode(),
			bytes.NewReader(cfg.bodies[i%len(cfg.bodies)]))
		req.Header.Set("Content-Type", "application/octet-stream")
		t := time.Now()
		err := do(c, req)
		rec.add(time.Since(t), err)
	}
}

func querier(cfg *config, query string, rec *recorder, stop chan struct{}) {
	c := newClient()
	for {
		select {
		case <-stop:
			return
		default:
		}
		q := url.Values{"query": {query}, "format": {"flamegraph"}, "from": {"now-5m"}, "until": {"now"}}
		req, _ := http.NewRequest("GET", "http://"+cfg.addr+"/api/v1/query?"+q.Encode(), nil)
		t := time.Now()
		err := do(c, req)
		rec.addQuery(time.Since(t), err)
	}
}

func readBodies(dir string) ([][]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("no bodies in %s", dir)
	}
	sort.Strings(names)
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	var cfg config
	var dir, query string
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:4040", "the server")
	flag.StringVar(&dir, "bodies", "", "a folder of gzipped pprof files to push")
	flag.StringVar(&cfg.name, "name", "load", "the series name; each agent adds agent=N")
	flag.IntVar(&cfg.agents, "agents", 200, "agents, one keep-alive connection each")
	flag.DurationVar(&cfg.interval, "interval", time.Second, "time between one agent's uploads; 0 = back to back")
	flag.DurationVar(&cfg.seconds, "duration", 60*time.Second, "how long agents push (with -interval > 0)")
	flag.Int64Var(&cfg.count, "count", 3000, "uploads in all (with -interval 0)")
	flag.StringVar(&query, "query", "", "a selector to merge in a loop while agents push; empty = none")
	flag.Parse()
	var err error
	if cfg.bodies, err = readBodies(dir); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	if cfg.interval == 0 {
		cfg.seconds = 24 * time.Hour
	}
	rec := &recorder{errors: map[string]int{}}
	var wg sync.WaitGroup
	var next int64
	cpu0, start := cpuSeconds(), time.Now()
	for a := 0; a < cfg.agents; a++ {
		wg.Add(1)
		go func(a int) { defer wg.Done(); agent(&cfg, a, rec, start, &next) }(a)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	if query != "" {
		go func() { querier(&cfg, query, rec, stop); close(done) }()
	} else {
		close(done)
	}
	wg.Wait()
	took := time.Since(start)
	close(stop) // the querier stops with the agents
	<-done
	sort.Slice(rec.lat, func(i, j int) bool { return rec.lat[i] < rec.lat[j] })
	sort.Slice(rec.qlat, func(i, j int) bool { return rec.qlat[i] < rec.qlat[j] })
	r := result{Uploads: len(rec.lat), Seconds: took.Seconds(), PerSecond: float64(len(rec.lat)) / took.Seconds(),
		P50ms: pct(rec.lat, 50), P99ms: pct(rec.lat, 99), P999ms: pct(rec.lat, 99.9), Errors: rec.errors,
		Queries: len(rec.qlat), QueryP50ms: pct(rec.qlat, 50), QueryP99ms: pct(rec.qlat, 99),
		ClientCPUSec: cpuSeconds() - cpu0, Late: rec.late}
	if len(rec.lat) > 0 {
		r.MaxMs = float64(rec.lat[len(rec.lat)-1]) / 1e6
	}
	json.NewEncoder(os.Stdout).Encode(r)
}
