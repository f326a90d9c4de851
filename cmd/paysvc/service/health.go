package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Probe bounds: a probe answers within about checkTimeout even when the database
// or the broker does not (both are checked at once), so an orchestrator's
// probe timeout (compose: 5s) is never what fails it.
const checkTimeout = 2 * time.Second

// check is one dependency's result on /readyz. Reason is a short fixed word,
// never an error's text: errors can carry addresses and user names.
type check struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	// Owned and Assigned are an engine's partitions (claimed, and given by the group).
	Owned    *int `json:"owned,omitempty"`
	Assigned *int `json:"assigned,omitempty"`
}

// readiness is the /readyz document.
type readiness struct {
	Status   string           `json:"status"` // ready, unavailable, starting or draining
	Instance string           `json:"instance"`
	Roles    []string         `json:"roles"`
	Checks   map[string]check `json:"checks"`
}

// Readiness checks what this instance needs to do its roles' work: the
// database, the broker, and for an engine its partitions. A process that is
// starting or draining (Close has begun) is not ready whatever the checks say,
// so a load balancer stops sending before the listener closes.
func (s *Service) Readiness(ctx context.Context) (ok bool, doc readiness) {
	doc = readiness{Instance: s.Config.InstanceID, Roles: s.Config.Roles, Checks: map[string]check{}}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	var mu sync.Mutex
	set := func(name string, c check) {
		mu.Lock()
		doc.Checks[name] = c
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if s.DB == nil {
			set("database", check{Reason: "not_open"})
		} else if err := s.DB.PingContext(ctx); err != nil {
			set("database", check{Reason: "unreachable"})
		} else {
			set("database", check{OK: true})
		}
	})
	wg.Go(func() {
		// A metadata request for no topic, sent as it is: kadm's helpers answer
		// from the client's metadata cache (5 s), which outlives a dead broker.
		// The commands a request produces, and everything the roles consume,
		// need a broker that answers.
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		if s.producer == nil {
			set("broker", check{Reason: "not_connected"})
		} else if _, err := req.RequestWith(ctx, s.producer); err != nil {
			set("broker", check{Reason: "unreachable"})
		} else {
			set("broker", check{OK: true})
		}
	})
	if s.Config.Has(RoleEngine) {
		c := check{Reason: "not_started"}
		if e := s.engine.Load(); e != nil {
			r := e.Readiness()
			c = check{OK: r.Ready, Reason: r.Reason, Owned: &r.Owned, Assigned: &r.Assigned}
		}
		set("engine", c)
	}
	wg.Wait()
	ok = true
	for _, c := range doc.Checks {
		ok = ok && c.OK
	}
	switch {
	case s.closing.Load():
		ok, doc.Status = false, "draining"
	case !s.ready.Load():
		ok, doc.Status = false, "starting"
	case ok:
		doc.Status = "ready"
	default:
		doc.Status = "unavailable"
	}
	return ok, doc
}

// readyz answers 200 when Readiness says so, else 503; the body lists each check.
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	ok, doc := s.Readiness(r.Context())
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, doc)
}

// livez is liveness: 503 once a role's loop has stopped on its own (the process
// no longer does part of its work and only a restart brings it back). It asks
// no dependency: an orchestrator restarting every instance because the database
// is down would make an outage worse.
func (s *Service) livez(w http.ResponseWriter, _ *http.Request) {
	if n := s.stoppedLoops.Load(); n > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "failed", "stopped_loops": n})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "alive"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// handleOperator adds the health endpoints and Go's profiler to the operator
// listener's mux. The profiler is registered by hand: importing net/http/pprof
// also registers it on http.DefaultServeMux, which no listener of paysvc serves.
func (s *Service) handleOperator(mux *http.ServeMux) {
	mux.HandleFunc("/readyz", s.readyz)
	mux.HandleFunc("/livez", s.livez)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
