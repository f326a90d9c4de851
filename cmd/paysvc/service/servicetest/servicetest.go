// Package servicetest starts a whole paysvc in a test: a private Postgres schema,
// its Kafka (topics/kafkatest: the shared real Apache Kafka cluster, in a namespace
// of its own, when the test binary asks for it and one is configured; otherwise an
// in-process kfake broker, real protocol) and the real roles, listening on a free
// port. Tests then talk to it over HTTP exactly as merchants do.
package servicetest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/cmd/paysvc/admin"
	"paysvc/cmd/paysvc/service"
	"paysvc/storage/storagetest"
	"paysvc/topics"
	"paysvc/topics/kafkatest"
)

// Env is a running service and what a test needs to call it.
type Env struct {
	T       testing.TB
	Svc     *service.Service
	Schema  storagetest.Schema
	BaseURL string
	// AdminURL is the operator listener's base URL (/metrics).
	AdminURL string
	Config   service.Config
	Logs     *LogBuffer
}

// Config returns a test configuration: free ports, a temp data dir, rate limit off,
// quick consumer-group failover, and a Kafka namespace of its own (Namespace):
// services of many tests may share one Kafka cluster, and every test exercises the
// namespace's plumbing, even on the embedded broker.
func Config(t testing.TB, schema storagetest.Schema) service.Config {
	cfg, err := service.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.AdminAddr = "127.0.0.1:0"
	cfg.KafkaPort = 0
	cfg.DataDir = t.TempDir()
	cfg.DatabaseURL = schema.URL
	// On the shared real cluster (topics/kafkatest) when this test binary asks
	// for it; else the embedded broker, one per service.
	if kafkatest.Real() {
		cfg.KafkaBrokers = kafkatest.Brokers(t)
	}
	cfg.KafkaNamespace = kafkatest.NewNamespace(t, cfg.KafkaBrokers)
	cfg.SessionTimeout = 2 * time.Second
	cfg.API.RateLimit = 0
	cfg.API.ReplyTimeout = 15 * time.Second
	cfg.CommandPartitions = 4
	cfg.SimAcceptDelay, cfg.SimFinalDelay = 20*time.Millisecond, 40*time.Millisecond
	cfg.SMTPSinkAddr = "127.0.0.1:0"
	cfg.ReminderInterval = 50 * time.Millisecond
	cfg.SimCardDelay = 20 * time.Millisecond
	cfg.SimPayoutDelay = 40 * time.Millisecond
	cfg.PayoutRecoverAfter = 5 * time.Second
	cfg.CardClearingInterval = 50 * time.Millisecond
	cfg.SubscriptionTick = 50 * time.Millisecond
	// The ledger audit's gauges are process-wide: one test's service must not
	// overwrite another's finding, so a test that checks them turns it on.
	cfg.LedgerAudit.Interval = 0
	// A test may make this process live; it runs on the in-process stand-ins by
	// name, as an operator would have to.
	cfg.AllowEmbeddedKafka, cfg.AllowSMTPSink = true, true
	// The fake Daraja of a live test is not Safaricom's production host.
	cfg.AllowDarajaNonProduction = true
	return cfg
}

// Namespace is a fresh Kafka namespace (kafkatest.NewNamespace): on the real
// cluster its topics and groups are deleted when the test ends.
func Namespace(t testing.TB, brokers []string) topics.Namespace {
	return kafkatest.NewNamespace(t, brokers)
}

// Topic is the name on the service's Kafka cluster of a logical topic (a
// constant of package topics), for a test that reads or writes the service's
// topics directly.
func (e *Env) Topic(logical string) string { return e.Config.KafkaNamespace.Topic(logical) }

// StartPeer starts a second process of the other kind beside e: the same
// database and command log (and so the same Kafka namespace), its own HTTP
// listener, environment and roles (all roles when none are given). It is the
// deployment docs/security.md defends, a sandbox and a live process sharing one
// PostgreSQL and one Kafka.
func StartPeer(t testing.TB, e *Env, environment string, roles ...string) *Env {
	t.Helper()
	cfg := e.Config
	cfg.Environment, cfg.API.Environment = environment, environment
	cfg.KafkaBrokers = e.Svc.Brokers
	cfg.InstanceID = e.Config.InstanceID + "-peer-" + environment
	cfg.DataDir = t.TempDir()
	if len(roles) > 0 {
		cfg.Roles = roles
	}
	logs := &LogBuffer{}
	var w io.Writer = logs
	if os.Getenv("PAYSVC_TEST_LOG") != "" {
		w = io.MultiWriter(logs, os.Stderr)
	}
	svc, err := service.Start(context.Background(), cfg, slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("start %s peer: %v", environment, err)
	}
	t.Cleanup(svc.Close)
	return &Env{T: t, Svc: svc, Schema: e.Schema, BaseURL: "http://" + svc.Addr, AdminURL: "http://" + svc.AdminAddr, Config: cfg, Logs: logs}
}

// Logger is quiet unless PAYSVC_TEST_LOG is set.
func Logger() *slog.Logger {
	if os.Getenv("PAYSVC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// LogBuffer keeps everything a service logged (at debug level, as JSON), so tests
// can check what logs contain, and never contain.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns the log so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Start runs a service with all roles; mutate adjusts the configuration first.
func Start(t testing.TB, mutate func(*service.Config)) *Env {
	t.Helper()
	schema := storagetest.New(t)
	cfg := Config(t, schema)
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &LogBuffer{}
	var w io.Writer = logs
	if os.Getenv("PAYSVC_TEST_LOG") != "" {
		w = io.MultiWriter(logs, os.Stderr)
	}
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := service.Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("start service: %v", err)
	}
	t.Cleanup(svc.Close)
	return &Env{T: t, Svc: svc, Schema: schema, BaseURL: "http://" + svc.Addr, AdminURL: "http://" + svc.AdminAddr, Config: cfg, Logs: logs}
}

// Launch starts a service on cfg, quiet unless PAYSVC_TEST_LOG is set, and leaves
// closing it to the caller: a test that stops and restarts services closes each
// one itself.
func Launch(t testing.TB, cfg service.Config) *service.Service {
	t.Helper()
	svc, err := service.Start(context.Background(), cfg, Logger())
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// Run is Launch with the Env that calls the service, whose database is schema.
func Run(t testing.TB, schema storagetest.Schema, cfg service.Config) *Env {
	t.Helper()
	svc := Launch(t, cfg)
	return &Env{T: t, Svc: svc, Schema: schema, BaseURL: "http://" + svc.Addr, Config: cfg}
}

// BuildBinary builds cmd/paysvc into the test's temporary directory and returns
// its path, for tests that run, signal and kill real processes.
func BuildBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "paysvc")
	if out, err := exec.Command("go", "build", "-o", bin, "paysvc/cmd/paysvc").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// Admin is a Kafka admin client of the service's brokers, for a test's own
// questions to them (offsets, topics, groups); it closes when the test ends.
func (e *Env) Admin() *kadm.Client {
	e.T.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Svc.Brokers...))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// Settlement is the id of the merchant's first wallet, the settlement wallet
// made with it; auth is the merchant's Bearer header.
func (e *Env) Settlement(auth []string) string {
	e.T.Helper()
	var list struct{ Results []map[string]any }
	e.Do("GET", "/api/v1/wallets/", nil, auth...).JSON(e.T, &list)
	return list.Results[0]["wallet_id"].(string)
}

// Deposit funds one of the merchant's wallets through the sandbox, and fails the
// test unless it is accepted.
func (e *Env) Deposit(auth []string, wallet, amount string) {
	e.T.Helper()
	if r := e.Do("POST", "/api/v1/sandbox/wallets/"+wallet+"/deposit/", map[string]any{"amount": amount}, auth...); r.Status != 200 {
		e.T.Fatalf("deposit: %d %s", r.Status, r.Body)
	}
}

// Merchant creates a sandbox merchant and returns its keys.
func (e *Env) Merchant(name string) admin.Created {
	e.T.Helper()
	m, err := admin.CreateMerchant(context.Background(), e.Schema.DB, name, e.Config.Environment)
	if err != nil {
		e.T.Fatalf("create merchant: %v", err)
	}
	return m
}

// Key issues a secret key of the merchant restricted to perms.
func (e *Env) Key(merchantID string, perms ...string) string {
	e.T.Helper()
	k, err := admin.CreateKey(context.Background(), e.Schema.DB, merchantID, perms)
	if err != nil {
		e.T.Fatalf("create key: %v", err)
	}
	return k.Key
}

// Response is a decoded HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	Close  bool // the server asked to close the connection (Go's client consumes the header)
}

// JSON decodes the body into v, failing the test if it is not JSON.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response %d is not JSON: %v: %s", r.Status, err, r.Body)
	}
}

// Map decodes the body as an object.
func (r Response) Map(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	r.JSON(t, &m)
	return m
}

// Do sends a request. body may be nil, a string, []byte or any JSON-encodable value.
func (e *Env) Do(method, path string, body any, headers ...string) Response {
	e.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			e.T.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, e.BaseURL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatal(err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b, Close: resp.Close}
}

// Metrics is one scrape of the operator listener's /metrics (Prometheus text).
func (e *Env) Metrics() string {
	e.T.Helper()
	base := e.AdminURL
	if base == "" && e.Svc != nil { // an Env built by hand around a service
		base = "http://" + e.Svc.AdminAddr
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		e.T.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.T.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// Bearer is the header pair for a secret key.
func Bearer(secret string) []string { return []string{"Authorization", "Bearer " + secret} }
