package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// metrics is one scrape of the service's /metrics, keyed by the series exactly as
// printed (name plus its label set), so a histogram's parts can be found by name
// and a label substring without a Prometheus client parser as a dependency.
type metrics map[string]float64

func scrapeMetrics(ctx context.Context, c *http.Client, base string) (metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text exposition format (what promhttp serves).
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m, sc.Err()
}

// sum adds every series of a name whose labels contain all the given fragments
// (e.g. `status="200"`), which also covers unlabelled series.
func (m metrics) sum(name string, labels ...string) float64 {
	var total float64
	for k, v := range m {
		series, rest, _ := strings.Cut(k, "{")
		if series != name || !hasAll(rest, labels) {
			continue
		}
		total += v
	}
	return total
}

func hasAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// histogram is the difference of one histogram between two scrapes.
type histogram struct {
	Sum, Count float64
	Buckets    []bucket // cumulative, sorted by upper bound
}

type bucket struct {
	LE    float64
	Count float64
}

func (m metrics) histogram(name string, labels ...string) histogram {
	h := histogram{Sum: m.sum(name+"_sum", labels...), Count: m.sum(name+"_count", labels...)}
	byLE := map[float64]float64{}
	for k, v := range m {
		series, rest, _ := strings.Cut(k, "{")
		if series != name+"_bucket" || !hasAll(rest, labels) {
			continue
		}
		_, le, ok := strings.Cut(rest, `le="`)
		if !ok {
			continue
		}
		le, _, _ = strings.Cut(le, `"`)
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		byLE[bound] += v
	}
	for le, n := range byLE {
		h.Buckets = append(h.Buckets, bucket{LE: le, Count: n})
	}
	sort.Slice(h.Buckets, func(i, j int) bool { return h.Buckets[i].LE < h.Buckets[j].LE })
	return h
}

// minus is what happened between two scrapes of the same histogram.
func (h histogram) minus(before histogram) histogram {
	out := histogram{Sum: h.Sum - before.Sum, Count: h.Count - before.Count}
	prev := map[float64]float64{}
	for _, b := range before.Buckets {
		prev[b.LE] = b.Count
	}
	for _, b := range h.Buckets {
		out.Buckets = append(out.Buckets, bucket{LE: b.LE, Count: b.Count - prev[b.LE]})
	}
	return out
}

func (h histogram) mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / h.Count
}

// quantile is the upper bound of the bucket holding the q-quantile: histograms
// only know "at most this", so that is what is reported.
func (h histogram) quantile(q float64) float64 {
	if h.Count == 0 {
		return 0
	}
	want := q * h.Count
	for _, b := range h.Buckets {
		if b.Count >= want {
			return b.LE
		}
	}
	return math.Inf(1)
}

// cpuTimes is cumulative CPU seconds of the parts that share this machine, read
// from /proc; on a machine without /proc the fields stay zero and are not printed.
type cpuTimes struct {
	At       time.Time
	Server   float64 // from the service's own process_cpu_seconds_total
	Postgres float64 // every process named postgres (the private cluster's backends)
	Bench    float64 // this process: the load generator competes for the same cores
	Busy     float64 // the whole machine, from /proc/stat
	OK       bool    // /proc was readable
}

const clockTicks = 100 // USER_HZ: 100 on every Linux configuration Go supports

func sampleCPU(m metrics) cpuTimes {
	c := cpuTimes{At: time.Now(), Server: m.sum("process_cpu_seconds_total")}
	self, err := procCPU("/proc/self/stat")
	if err != nil {
		return c
	}
	c.Bench = self
	c.OK = true
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		// user nice system idle iowait irq softirq steal: busy is all but idle+iowait.
		for i := 1; i < len(f) && i <= 8; i++ {
			v, _ := strconv.ParseFloat(f[i], 64)
			if i != 4 && i != 5 {
				c.Busy += v / clockTicks
			}
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !strings.Contains(string(b), "(postgres)") {
			continue
		}
		if v, err := parseProcStat(string(b)); err == nil {
			c.Postgres += v
		}
	}
	return c
}

func procCPU(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}

// parseProcStat returns utime+stime in seconds. The command name in parentheses
// may itself hold spaces, so fields are counted from the last ')'.
func parseProcStat(s string) (float64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad stat line")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("bad stat line")
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad stat line")
	}
	return (u + st) / clockTicks, nil
}

// cpuUse is cores used between two samples by each part.
type cpuUse struct {
	Server, Postgres, Bench, Busy float64
	OK                            bool
}

func cpuBetween(a, b cpuTimes) cpuUse {
	d := b.At.Sub(a.At).Seconds()
	if d <= 0 {
		return cpuUse{}
	}
	return cpuUse{Server: (b.Server - a.Server) / d, Postgres: (b.Postgres - a.Postgres) / d,
		Bench: (b.Bench - a.Bench) / d, Busy: (b.Busy - a.Busy) / d, OK: a.OK && b.OK}
}

// other is the machine's busy time not accounted to the parts of the run: other
// processes on a shared machine (a build, another test) and the kernel's own work.
// When it is large the run's figures are not the machine's.
func (u cpuUse) other(withServer bool) float64 {
	o := u.Busy - u.Postgres - u.Bench
	if withServer {
		o -= u.Server
	}
	return max(o, 0)
}
