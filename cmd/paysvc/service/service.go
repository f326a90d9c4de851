package service

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/engine"
	"paysvc/actors/engine/replies"
	"paysvc/actors/outbound/mail"
	"paysvc/topics"
	"paysvc/topics/tracing"
)

// Service is a running paysvc process (or, in tests, one of several in a process).
type Service struct {
	Config  Config
	DB      *sqlx.DB
	idemDB  *sqlx.DB
	sink    *mail.Sink
	Brokers []string
	Addr    string // the HTTP listener's address
	// AdminAddr is the operator listener's address (/metrics); empty when it is off.
	AdminAddr string
	Log       *slog.Logger

	cluster  *kfake.Cluster
	producer *kgo.Client
	hub      *replies.Hub
	httpSrv  *http.Server
	adminSrv *http.Server
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	ready    atomic.Bool
	// closing is set when Close begins: /readyz says draining, and loops that
	// end from then on were stopped, not failed (stoppedLoops, /livez).
	closing      atomic.Bool
	stoppedLoops atomic.Int64
	engine       atomic.Pointer[engine.Engine] // for /readyz; nil without the role

	// relayProducer publishes the outbox; its batches fit the event topics.
	relayProducer *kgo.Client
	// stopTracing flushes and stops the OTLP exporter (a no-op when tracing is off).
	stopTracing func(context.Context) error
}

// Start brings up the configured roles and returns once the HTTP listener is open.
// It reads as the list of what runs: the set-up every role shares, then each
// role's start (roles_*.go), then the listeners. The order is the one the roles
// depend on, said at each step.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	if err := cfg.CheckStandIns(); err != nil {
		return nil, err
	}
	// Log lines written with a request's or a command's context carry its trace id.
	log = slog.New(tracing.LogHandler(log.Handler()))
	if cfg.Environment == "live" && cfg.Daraja.ConsumerKey != "" && !cfg.DarajaIsProduction() {
		// Only with PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE (CheckStandIns).
		log.Warn("live server sending to a Daraja host that is not Safaricom's production API (PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE=true): "+
			"its outcomes are recorded as live payments", "daraja_base_url", cfg.Daraja.BaseURL)
	}
	s := &Service{Config: cfg, Log: log}
	run, stop := context.WithCancel(context.Background())
	s.cancel = stop
	list := cfg.Aggregates
	if list == nil {
		list = Aggregates(cfg.API.Fees, cfg.API.Rates)
	}
	st := &starter{Service: s, cfg: cfg, run: run, wake: func() {}, kinds: Kinds(list)}
	defer func() {
		if err != nil {
			if st.publicLn != nil { // the public server never took it
				_ = st.publicLn.Close()
			}
			s.Close()
		}
	}()
	// Tracing, the database and its migrations, Kafka (embedded without brokers),
	// the command producer and the topics: every role's (setup.go).
	if err := st.setUp(ctx); err != nil {
		return nil, err
	}
	for _, step := range []struct {
		on    bool
		start func(context.Context) error
	}{
		// Before anything consumes: an engine refuses a command log behind the
		// offsets the database stored (commandlog.go).
		{cfg.Has(RoleEngine), st.checkCommandLog},
		// The relay before the engine: the engine wakes it after each commit.
		{cfg.Has(RoleRelay), st.startRelay},
		{cfg.Has(RoleEngine), st.startEngine},
		// What the dispatcher and the API send with: the mail sender (or the
		// embedded sink) and the webhooks' trusted roots.
		{true, st.startSenders},
		{cfg.Has(RoleRails), st.startRails},
		{cfg.Has(RoleDispatcher), st.startDispatcher},
		// The listeners last (listeners.go). The public address first: it is the
		// default public base URL the API's links carry. Then the operator
		// listener, the API role behind the public one, and only then does the
		// public one take requests, every role above running.
		{true, st.listenPublic},
		{cfg.AdminAddr != AdminOff, st.serveAdmin},
		{cfg.Has(RoleAPI), st.startAPI},
		{true, st.servePublic},
	} {
		if !step.on {
			continue
		}
		if err := step.start(ctx); err != nil {
			return nil, err
		}
	}
	s.ready.Store(true)
	log.Info("paysvc serving", "addr", s.Addr, "admin_addr", s.AdminAddr, "roles", cfg.Roles, "environment", cfg.Environment, "instance", cfg.InstanceID)
	return s, nil
}

// starter is what the roles share while Start brings them up.
type starter struct {
	*Service
	// cfg is Start's copy of the configuration, which the steps complete for the
	// ones after them (the mail sender's From, the webhooks' roots, the public
	// base URL); Service.Config stays as it was given.
	cfg Config
	// run is the context of the roles' loops: Close cancels it.
	run context.Context
	// wake is the relay's (a no-op without it): the engine calls it after each commit.
	wake func()
	// kinds are the aggregates (Config.Aggregates, else Aggregates): the engine applies them, the rails
	// role runs their sandbox rails.
	kinds []engine.Kind
	// mailer sends the API's and the dispatcher's mail (nil when neither runs).
	mailer mail.Sender
	// publicLn is the public listener, and app the API role's handler on it.
	publicLn net.Listener
	app      http.Handler
}

// healthz is the health of a process: 200 once started and while its database
// answers (the API role's own /healthz says the same on the public port).
func (s *Service) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if !s.ready.Load() || s.DB.PingContext(ctx) != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"unavailable"}`))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// notFound is the JSON 404 of paths the listener does not serve.
func notFound(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"type":"client_error","detail":"Not found.","errors":[{"code":"not_found","detail":"Not found.","attr":null}]}`))
}

// produceCommand appends a command to the command log, keyed by its merchant,
// stamped with this process's environment when its producer left it out.
func (s *Service) produceCommand(ctx context.Context, c topics.Command) error {
	if c.Environment == "" {
		c.Environment = s.Config.Environment
	}
	b, err := topics.EncodeCommand(c)
	if err != nil {
		return err
	}
	return s.producer.ProduceSync(ctx, &kgo.Record{Topic: s.Config.KafkaNamespace.Topic(topics.CommandsTopic), Key: topics.CommandKey(c.MerchantID), Value: b}).FirstErr()
}

func (s *Service) goRun(f func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := f()
		if !s.closing.Load() {
			// A loop ends on its own only when it failed for good: /livez says so.
			s.stoppedLoops.Add(1)
			s.Log.Error("role stopped", "err", err)
		} else if err != nil {
			s.Log.Error("role stopped", "err", err)
		}
	}()
}

// Close stops accepting requests, lets in-flight ones finish, stops the roles and
// releases everything. It is safe on a partly started service.
func (s *Service) Close() {
	start := time.Now()
	s.closing.Store(true) // /readyz answers 503 "draining" from now on
	wasReady := s.ready.Swap(false)
	if d := s.Config.DrainDelay; wasReady && d > 0 {
		// Keep serving while load balancers see /readyz (and the API's /healthz)
		// fail and stop sending here; then close the listener.
		s.Log.Info("draining: not ready, still serving", "drain_delay", d)
		time.Sleep(d)
	}
	delayed := time.Now()
	if s.httpSrv != nil {
		// Requests in flight are answered: each waits at most the reply timeout
		// for the engine, which runs until they are done.
		ctx, cancel := context.WithTimeout(context.Background(), max(10*time.Second, s.Config.API.ReplyTimeout+5*time.Second))
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			s.Log.Warn("requests still in flight at the shutdown bound", "err", err)
		}
		cancel()
	}
	httpDone := time.Now()
	// The roles stop after the requests: an engine finishes its commit in flight
	// and leaves its consumer group (its partitions move at once), consumers leave
	// theirs when their clients close.
	if s.cancel != nil {
		s.cancel()
	}
	if s.adminSrv != nil { // after the requests, so /readyz says draining meanwhile
		_ = s.adminSrv.Close()
	}
	s.wg.Wait()
	if wasReady {
		// The three phases, for docs/operations.md: the drain delay, the requests
		// in flight answered, the roles stopped (commits finished, groups left).
		s.Log.Info("drained", "delay", delayed.Sub(start).String(), "requests", httpDone.Sub(delayed).String(),
			"roles", time.Since(httpDone).String(), "total", time.Since(start).String())
	}
	if s.hub != nil {
		s.hub.Close()
	}
	if s.producer != nil {
		s.producer.Close()
	}
	if s.relayProducer != nil {
		s.relayProducer.Close()
	}
	if s.sink != nil {
		s.sink.Close()
	}
	if s.cluster != nil {
		s.cluster.Close()
	}
	if s.idemDB != nil {
		s.idemDB.Close()
	}
	if s.DB != nil {
		s.DB.Close()
	}
	if s.stopTracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.stopTracing(ctx); err != nil {
			s.Log.Warn("flush traces", "err", err)
		}
		cancel()
	}
}
