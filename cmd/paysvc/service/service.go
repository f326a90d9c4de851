package service

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/subscription/scheduler"
	"paysvc/actors/engine"
	"paysvc/actors/engine/replies"
	"paysvc/actors/outbound/mail"
	"paysvc/actors/outbound/relay"
	"paysvc/actors/outbound/webhooks/callback"
	"paysvc/actors/outbound/webhooks/dispatch"
	"paysvc/actors/outbound/webhooks/outbound"
	"paysvc/actors/rails"
	"paysvc/actors/rails/card"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/rails/payout"
	"paysvc/api"
	"paysvc/api/deadline"
	"paysvc/storage"
	"paysvc/topics"
	"paysvc/topics/inproc"
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
func Start(ctx context.Context, cfg Config, log *slog.Logger) (_ *Service, err error) {
	if err := cfg.CheckStandIns(); err != nil {
		return nil, err
	}
	// Log lines written with a request's or a command's context carry its trace id.
	log = slog.New(tracing.LogHandler(log.Handler()))
	s := &Service{Config: cfg, Log: log}
	registerAggregates()
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.stopTracing, err = tracing.Start(ctx, cfg.Tracing, cfg.InstanceID); err != nil {
		return nil, err
	}
	if s.DB, err = storage.Open(ctx, cfg.DatabaseURL, 30*time.Second); err != nil {
		return nil, err
	}
	if applied, err := storage.Migrate(ctx, s.DB); err != nil {
		return nil, err
	} else if len(applied) > 0 {
		log.Info("migrations applied", "versions", applied)
	}
	s.Brokers = cfg.KafkaBrokers
	if len(s.Brokers) == 0 {
		// The options of `paysvc broker` (broker.go), plus the in-memory path for
		// this process's own clients.
		opts := append(brokerOpts(cfg), kfake.ListenFn(inproc.Listen))
		if s.cluster, err = kfake.NewCluster(opts...); err != nil {
			return nil, fmt.Errorf("embedded kafka on port %d: %w", cfg.KafkaPort, err)
		}
		s.Brokers = s.cluster.ListenAddrs()
		log.Info("embedded kafka started", "brokers", s.Brokers, "data_dir", cfg.KafkaDir())
		if cfg.Environment == "live" { // only with PAYSVC_ALLOW_EMBEDDED_KAFKA (Validate)
			log.Warn("live server on the embedded Kafka broker (PAYSVC_ALLOW_EMBEDDED_KAFKA=true): the command log is on this machine's disk only")
		}
	}
	s.producer, err = kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.Dialer(inproc.Dial), inproc.Compression(s.Brokers), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(topics.MaxRecordBytes),
		kgo.ClientID("paysvc-"+cfg.InstanceID), kgo.ProduceRequestTimeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = topics.EnsureTopics(tctx, s.producer, cfg.CommandPartitions)
	cancel()
	if err != nil {
		return nil, err
	}

	if cfg.Has(RoleEngine) {
		if err := checkCommandLog(ctx, s.DB, s.producer, cfg.AcceptCommandLogReset, log); err != nil {
			return nil, err
		}
	}

	runCtx, stop := context.WithCancel(context.Background())
	s.cancel = stop
	wake := func() {}
	if cfg.Has(RoleRelay) {
		// Its own client: the command producer's batches may be larger than the
		// event topics accept (relay.BatchMaxBytes).
		if s.relayProducer, err = relay.NewClient(s.Brokers, "paysvc-relay-"+cfg.InstanceID); err != nil {
			return nil, fmt.Errorf("relay kafka client: %w", err)
		}
		r := relay.New(s.DB, s.relayProducer, log, cfg.RelayPoll)
		wake = r.Wake
		s.goRun(func() error { return r.Run(runCtx) })
		// The ledger audited continuously, by one relay instance at a time.
		if cfg.LedgerAudit.Interval > 0 {
			s.goRun(func() error { return runLedgerAudit(runCtx, s.DB, cfg.LedgerAudit, log) })
		}
	}
	if cfg.Has(RoleEngine) {
		e, err := engine.New(engine.Config{Brokers: s.Brokers, Owner: cfg.InstanceID, SessionTimeout: cfg.SessionTimeout,
			ActorIdle: cfg.EngineIdleAfter,
			Logger:    log, OnCommit: wake}, s.DB)
		if err != nil {
			return nil, err
		}
		s.engine.Store(e)
		s.goRun(func() error { return e.Run(runCtx) })
		s.goRun(func() error { return trimCommandReplies(runCtx, s.DB, cfg.Retention, log) })
	}

	var mailer mail.Sender
	sendsMail := cfg.SendsMail()
	if sendsMail && cfg.SMTPURL != "" {
		mc, err := mail.ParseURL(cfg.SMTPURL)
		if err != nil {
			return nil, fmt.Errorf("PAYSVC_SMTP_URL: %w", err)
		}
		if mc.From != "" {
			cfg.API.MailFrom = mc.From
		}
		mailer = mail.NewSMTPSender(mc)
	} else if sendsMail {
		if s.sink, err = mail.NewSink(cfg.SMTPSinkAddr); err != nil {
			return nil, fmt.Errorf("embedded SMTP sink on %s (PAYSVC_SMTP_SINK_ADDR): %w", cfg.SMTPSinkAddr, err)
		}
		host, port, _ := net.SplitHostPort(s.sink.Addr())
		p, _ := strconv.Atoi(port)
		mailer = mail.NewSMTPSender(mail.Config{Host: host, Port: p, From: cfg.API.MailFrom, StartTLS: mail.StartTLSOff})
		log.Info("embedded SMTP sink started", "addr", s.sink.Addr())
		if cfg.Environment == "live" { // only with PAYSVC_ALLOW_SMTP_SINK (Validate)
			log.Warn("live server on the embedded SMTP sink (PAYSVC_ALLOW_SMTP_SINK=true): customers' pay-request emails are not delivered")
		}
	}

	if cfg.Has(RoleRails) {
		// Everything the rails role sends, recovers and answers is its own
		// environment's (rails.Scope): sandbox and live rails roles may share one
		// Kafka and one database. Simulators' outcomes say Simulated.
		scope := rails.NewScope(s.DB, cfg.Environment)
		sandbox := cfg.Environment == "sandbox"
		// Payouts: the sandbox simulates every provider; a live server has no payout
		// adapter but MPESA-B2C through Daraja (when configured, below), so each other
		// transaction fails at once, saying so, and its hold is released (never a
		// silent success).
		truthful := rails.PayoutSink(s.producer, scope.Origin(false))
		var payoutRail rails.PayoutRail = rails.Unconfigured{Sink: truthful}
		closeRail := func() error { return nil }
		if sandbox {
			sim := payout.NewSimulator(rails.PayoutSink(s.producer, scope.Origin(true)), payout.Options{Delay: cfg.SimPayoutDelay})
			payoutRail, closeRail = sim, sim.Close
		}
		if d := cfg.Daraja; d.ConsumerKey != "" && d.B2CInitiatorName+d.B2CSecurityCredential+d.B2CShortcode != "" {
			// MPESA-B2C through Daraja (sandbox or live); other providers as above.
			b2c, err := mpesa.NewB2C(d, &http.Client{Timeout: 30 * time.Second})
			if err != nil {
				return nil, fmt.Errorf("PAYSVC_DARAJA_B2C_*: %w", err)
			}
			payoutRail = &rails.DarajaB2C{Payer: b2c, DB: s.DB, Sink: truthful, Others: payoutRail,
				Pause: cfg.DarajaB2CPause, Log: log}
			log.Info("rails role: MPESA-B2C payouts through Daraja", "daraja", b2c.String())
			if d.B2CStatusURL != "" { // ask Daraja about the payouts whose outcome did not come
				s.goRun(func() error {
					return rails.QueryB2CPayouts(runCtx, s.DB, scope, b2c, cfg.PayoutRecoverAfter, max(cfg.PayoutRecoverAfter/4, 100*time.Millisecond), log)
				})
			}
		}
		s.goRun(func() error {
			defer closeRail()
			return rails.RunPayouts(runCtx, s.Brokers, s.DB, scope, payoutRail, truthful, log)
		})
		s.goRun(func() error {
			return rails.RecoverPayouts(runCtx, s.DB, scope, payoutRail, cfg.PayoutRecoverAfter, max(cfg.PayoutRecoverAfter/4, 100*time.Millisecond), log)
		})
		// Card and PesaLink collections: simulated in the sandbox, whatever M-Pesa
		// uses; a live server has no adapter yet, and their charges wait in
		// their topics.
		if sandbox {
			cards := card.NewSimulator(rails.Sink(s.producer, scope.Origin(true)), cfg.SimCardDelay)
			s.goRun(func() error {
				defer cards.Close()
				return rails.RunCards(runCtx, s.Brokers, scope, topics.RailsCardTopic, cards, log)
			})
			pesalink := card.NewPesalinkSimulator(rails.Sink(s.producer, scope.Origin(true)), cfg.SimCardDelay)
			s.goRun(func() error {
				defer pesalink.Close()
				return rails.RunCards(runCtx, s.Brokers, scope, topics.RailsPesalinkTopic, pesalink, log)
			})
		}
		switch {
		case cfg.Daraja.ConsumerKey != "":
			d, err := mpesa.NewDaraja(cfg.Daraja, &http.Client{Timeout: 30 * time.Second})
			if err != nil {
				return nil, fmt.Errorf("PAYSVC_DARAJA_*: %w", err)
			}
			sink := rails.Sink(s.producer, scope.Origin(false))
			s.goRun(func() error {
				return rails.Run(runCtx, s.Brokers, d, rails.Options{RecordAccepted: true, Scope: scope}, log)
			})
			s.goRun(func() error {
				return rails.Recover(runCtx, s.DB, scope, d, sink, cfg.DarajaQueryAfter, max(cfg.DarajaQueryAfter/4, 100*time.Millisecond), log)
			})
			log.Info("rails role: M-Pesa through Daraja", "daraja", cfg.Daraja.String())
		case sandbox:
			sim := mpesa.NewSimulator(rails.Sink(s.producer, scope.Origin(true)), mpesa.SimOptions{AcceptDelay: cfg.SimAcceptDelay, FinalDelay: cfg.SimFinalDelay})
			s.goRun(func() error {
				defer sim.Close()
				return rails.Run(runCtx, s.Brokers, sim, rails.Options{RetryUnavailable: true, Scope: scope, Simulated: true}, log)
			})
			// Not before the slowest outcome (a prompt nobody answers, 3x the two
			// delays) could have arrived twice over.
			after := max(cfg.SimRecoverAfter, 6*(cfg.SimAcceptDelay+cfg.SimFinalDelay))
			s.goRun(func() error {
				return rails.RecoverSandbox(runCtx, s.DB, scope, sim, after, max(after/4, 100*time.Millisecond), log)
			})
		default:
			// Nothing is lost: prompts wait in their topic until a rails role with a
			// live adapter consumes them.
			log.Error("rails role: no M-Pesa adapter configured (PAYSVC_DARAJA_*); STK requests wait in " + topics.RailsMpesaSTKTopic)
		}
		s.goRun(func() error {
			return rails.ClearCards(runCtx, s.DB, scope, s.producer, cfg.CardClearingDelay, cfg.CardClearingInterval, log)
		})
		s.goRun(func() error { return watchCollections(runCtx, s.DB, cfg.Environment, 30*time.Second, log) })
	}

	if cfg.WebhookCAFile != "" {
		if cfg.API.WebhookRootCAs, err = webhookRoots(cfg.WebhookCAFile); err != nil {
			return nil, err
		}
	}
	if cfg.Has(RoleDispatcher) {
		client := outbound.New(outbound.Options{AllowPrivate: cfg.API.WebhookAllowPrivate && cfg.Environment == "sandbox",
			RootCAs: cfg.API.WebhookRootCAs})
		cfg.Webhooks.MailFrom = cfg.API.MailFrom
		cfg.Webhooks.SessionTimeout = cfg.SessionTimeout
		dsp := dispatch.New(cfg.Webhooks, s.DB, client, mailer, log)
		s.goRun(func() error { return dsp.Run(runCtx, s.Brokers) })
		s.goRun(func() error { return callback.Run(runCtx, s.Brokers, s.DB, client, log) })
		s.goRun(func() error { return pruneWebhookEvents(runCtx, s.DB, cfg.Retention, log) })
	}
	if cfg.Has(RoleRails) && cfg.Environment == "sandbox" {
		// Registered aggregates' sandbox rails (refunds), each as its kind defines it.
		for _, k := range engine.Kinds() {
			if k.Simulate == nil {
				continue
			}
			d := engine.SimDeps{DB: s.DB, Environment: cfg.Environment, Delay: cfg.SimAggregateDelay, Log: log, Produce: s.produceCommand}
			s.goRun(func() error { return k.Simulate(runCtx, d) })
		}
	}
	if cfg.Has(RoleRails) && cfg.SubscriptionTick > 0 {
		// Subscription cycles: stateless and restart-safe; any number of rails
		// instances may run it (cycle ids are derived, docs/api-decisions.md).
		// It bills only its environment's enabled merchants, and stamps its
		// cycles with the environment and Simulated (a cycle's charge is
		// answered by the subscription's test card).
		sch := &scheduler.Scheduler{DB: s.DB, Environment: cfg.Environment, Produce: scheduler.KafkaProducer(s.producer), Log: log,
			Fees: cfg.API.Fees, Rates: cfg.API.Rates}
		s.goRun(func() error { return sch.Run(runCtx, cfg.SubscriptionTick) })
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.HTTPAddr, err)
	}
	defer func() {
		if err != nil { // the server below never took it
			_ = ln.Close()
		}
	}()
	s.Addr = ln.Addr().String()
	if cfg.PublicBaseURL == "" {
		cfg.PublicBaseURL = defaultPublicBaseURL(s.Addr)
		if cfg.Environment == "live" {
			log.Warn("PAYSVC_PUBLIC_BASE_URL is not set: checkout links in responses and emails point at "+cfg.PublicBaseURL,
				"public_base_url", cfg.PublicBaseURL)
		}
	}
	cfg.API.PublicBaseURL = cfg.PublicBaseURL

	// The operator listener: metrics (and health) for whoever runs the service, on
	// an address of its own (loopback by default), never on the public port.
	if cfg.AdminAddr != AdminOff {
		aln, err := net.Listen("tcp", cfg.AdminAddr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s (PAYSVC_ADMIN_ADDR): %w", cfg.AdminAddr, err)
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
	}

	mux := http.NewServeMux()
	if cfg.Has(RoleAPI) {
		s.hub = replies.NewHub(cfg.InstanceID)
		remote, err := replies.NewRemote(ctx, s.Brokers, s.hub, s.producer, log)
		if err != nil {
			return nil, err
		}
		s.goRun(func() error { return remote.Run(runCtx) })
		idemURL, err := storage.WithParam(cfg.DatabaseURL, "synchronous_commit", "off")
		if err != nil {
			return nil, err
		}
		if s.idemDB, err = storage.Open(ctx, idemURL, 30*time.Second); err != nil {
			return nil, err
		}
		s.goRun(func() error {
			return pruneIdempotency(runCtx, s.idemDB, cfg.Retention.Interval, cfg.API.IdempotencyTTL, log)
		})
		a := api.New(cfg.API, api.Deps{DB: s.DB, IdempotencyDB: s.idemDB, Kafka: s.producer, Brokers: s.Brokers, Hub: s.hub, Log: log,
			Ready: s.ready.Load, Mailer: mailer, Sink: s.sink})
		s.goRun(func() error { return a.RunReminders(runCtx, cfg.ReminderInterval) })
		mux.Handle("/", a.Handler())
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
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	s.goRun(func() error {
		if err := s.httpSrv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	s.ready.Store(true)
	log.Info("paysvc serving", "addr", s.Addr, "admin_addr", s.AdminAddr, "roles", cfg.Roles, "environment", cfg.Environment, "instance", cfg.InstanceID)
	return s, nil
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
	return s.producer.ProduceSync(ctx, &kgo.Record{Topic: topics.CommandsTopic, Key: topics.CommandKey(c.MerchantID), Value: b}).FirstErr()
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

// webhookRoots is the system trust plus the PEM certificates of file.
func webhookRoots(file string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("PAYSVC_WEBHOOK_CA_FILE: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("PAYSVC_WEBHOOK_CA_FILE: no PEM certificate in %s", file)
	}
	return pool, nil
}
