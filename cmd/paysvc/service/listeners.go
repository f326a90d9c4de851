package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"paysvc/api"
	"paysvc/api/deadline"
)

// listenPublic opens the public listener (it serves later, servePublic) and,
// when PAYSVC_PUBLIC_BASE_URL is not set, makes its address the public base URL.
func (st *starter) listenPublic(context.Context) (err error) {
	cfg := &st.cfg
	if st.publicLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	st.Addr = st.publicLn.Addr().String()
	if cfg.PublicBaseURL == "" {
		cfg.PublicBaseURL = defaultPublicBaseURL(st.Addr)
		if cfg.Environment == "live" {
			st.Log.Warn("PAYSVC_PUBLIC_BASE_URL is not set: checkout links in responses and emails point at "+cfg.PublicBaseURL,
				"public_base_url", cfg.PublicBaseURL)
		}
	}
	cfg.API.PublicBaseURL = cfg.PublicBaseURL
	return nil
}

// serveAdmin opens and serves the operator listener: metrics (and health) for
// whoever runs the service, on an address of its own (loopback by default),
// never on the public port.
func (st *starter) serveAdmin(context.Context) error {
	s, cfg, log := st.Service, st.cfg, st.Log
	aln, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (PAYSVC_ADMIN_ADDR): %w", cfg.AdminAddr, err)
	}
	s.AdminAddr = aln.Addr().String()
	admin := http.NewServeMux()
	// This process's database gauges (gauges.go) are its own registry's, beside
	// the process-wide default one: several services in one test process
	// each serve their own.
	gauges := prometheus.NewRegistry()
	newDBGauges(gauges, s.DB, cfg, log)
	admin.Handle("/metrics", promhttp.InstrumentMetricHandler(prometheus.DefaultRegisterer,
		promhttp.HandlerFor(prometheus.Gatherers{prometheus.DefaultGatherer, gauges}, promhttp.HandlerOpts{})))
	admin.HandleFunc("/healthz", s.healthz)
	s.handleOperator(admin) // /readyz, /livez, /debug/pprof/ (health.go)
	admin.HandleFunc("/", notFound)
	s.adminSrv = &http.Server{Handler: admin, ReadHeaderTimeout: cfg.HTTP.Read, ReadTimeout: cfg.HTTP.Read,
		WriteTimeout: cfg.HTTP.Write, IdleTimeout: cfg.HTTP.Idle, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	s.goRun(func() error {
		if err := s.adminSrv.Serve(aln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return nil
}

// servePublic serves the public listener: the API role's handler, or, without
// that role, only /healthz.
func (st *starter) servePublic(context.Context) error {
	s, cfg := st.Service, st.cfg
	mux := http.NewServeMux()
	if st.app != nil {
		mux.Handle("/", st.app)
	} else {
		mux.HandleFunc("/healthz", s.healthz)
		mux.HandleFunc("/", notFound)
	}
	// Slow clients are bounded per request (api/deadline): a body must keep up a
	// minimum rate, so a payment file of megabytes on a slow link is read, while a
	// dribbled one is cut; the answer's bound counts from the body's end. The
	// server's WriteTimeout is that bound for requests without a body. No
	// ReadTimeout: it would also cut handlers that outlive it (the server cancels a
	// request whose connection read times out while the handler still runs).
	public := deadline.Handler(mux, deadline.Options{MinRate: cfg.HTTP.BodyMinRate, Grace: cfg.HTTP.Read,
		Write: cfg.HTTP.Write, MaxBody: api.MaxBodyBytes(cfg.API.BodyLimit)})
	s.httpSrv = &http.Server{Handler: public, ReadHeaderTimeout: cfg.HTTP.Read, WriteTimeout: cfg.HTTP.Write, IdleTimeout: cfg.HTTP.Idle,
		ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn)}
	ln := st.publicLn
	st.publicLn = nil // the server has it now: Start's clean-up leaves it to Close
	s.goRun(func() error {
		if err := s.httpSrv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return nil
}

// defaultPublicBaseURL is the address listened on as a URL; a wildcard listen
// address (0.0.0.0, ::) is not reachable as such, so it becomes localhost.
func defaultPublicBaseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}
