package service

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/outbound/relay"
	"paysvc/actors/outbound/webhooks/dispatch"
	"paysvc/actors/rails/mpesa"
	"paysvc/actors/values/ids"
	"paysvc/api"
	"paysvc/topics"
	"paysvc/topics/tracing"
)

// Roles a process can run.
const (
	RoleAPI    = "api"
	RoleEngine = "engine"
	RoleRelay  = "relay"
	RoleRails  = "rails"
	// RoleDispatcher delivers webhooks.
	RoleDispatcher = "dispatcher"
)

// AllRoles is what `paysvc serve` runs by default.
var AllRoles = []string{RoleAPI, RoleEngine, RoleRelay, RoleRails, RoleDispatcher}

// DefaultAdminAddr is where the operator listener (/metrics) listens by default:
// loopback, so nothing operators use is reachable from where merchants are.
const DefaultAdminAddr = "127.0.0.1:9090"

// AdminOff as PAYSVC_ADMIN_ADDR runs no operator listener (an empty variable
// means the default, like every other).
const AdminOff = "off"

// DefaultDatabaseURL is the private cluster that `make run` starts, so admin
// commands find the same database with no flags.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:55432/paysvc?sslmode=disable"

// Config is the whole configuration of a process, one part per concern.
type Config struct {
	HTTPAddr string
	// AdminAddr is the operator listener (/metrics, /healthz): loopback by default,
	// never the public API port; AdminOff turns it off.
	AdminAddr string
	// HTTP bounds how long a request may hold a connection of the public listener.
	HTTP              HTTPTimeouts
	DatabaseURL       string
	KafkaBrokers      []string // empty: start the embedded Kafka
	KafkaPort         int      // embedded Kafka's port (0: any free port)
	DataDir           string
	Environment       string // sandbox or live
	Roles             []string
	CommandPartitions int32
	// CommandRetention is how long the command log (and the rail requests and
	// callbacks) keeps records; EventRetention the event topics'. An engine that
	// stays down longer than CommandRetention refuses to resume past the commands
	// Kafka deleted (commandlog.go).
	CommandRetention, EventRetention time.Duration
	InstanceID                       string
	SessionTimeout                   time.Duration // engine consumer-group session
	// EngineIdleAfter is how long an actor may go without a command before the
	// engine stops and forgets it (rehydrated from its snapshot when needed again).
	EngineIdleAfter time.Duration
	KafkaSyncWrites bool // embedded Kafka fsyncs every produce
	// KafkaNamespace prefixes every topic and consumer group of the deployment
	// on the cluster (PAYSVC_KAFKA_NAMESPACE, topics.Namespace), so several
	// deployments share one Kafka cluster; empty: the names as they are.
	KafkaNamespace topics.Namespace
	// AllowEmbeddedKafka and AllowSMTPSink let a live server run on the
	// development stand-ins (the in-process broker, the mail sink that delivers
	// nothing). Without them a live server refuses to start on either: a
	// forgotten PAYSVC_KAFKA_BROKERS or PAYSVC_SMTP_URL must not silently keep
	// the command log on one disk or send customers' mail nowhere.
	AllowEmbeddedKafka, AllowSMTPSink bool
	// AllowDarajaNonProduction lets a live server send through a Daraja host
	// other than DarajaProductionHost (Safaricom's sandbox, a proxy, a test
	// double). Without it a live server with Daraja credentials refuses to start
	// on any other host: the sandbox's outcomes would be stamped as real
	// payments. It is warned at every start.
	AllowDarajaNonProduction bool
	// AcceptCommandLogReset lets an engine start on a command log that is behind the
	// stored offsets (a deliberately wiped Kafka), moving the offsets to its end.
	AcceptCommandLogReset bool
	LogLevel              slog.Level
	LogFormat             string // auto, json or text
	// DBMaxConns bounds this process's PostgreSQL connections, all its pools
	// together; 0 sizes them from its roles (DBPools).
	DBMaxConns int
	API        api.Config
	// SimAcceptDelay and SimFinalDelay pace the sandbox M-Pesa simulator.
	SimAcceptDelay, SimFinalDelay time.Duration
	// SimRecoverAfter: a sandbox M-Pesa invoice with no outcome for this long has its
	// prompt sent again (the simulator's process stopped with it in flight).
	SimRecoverAfter time.Duration
	// Daraja is the live M-Pesa adapter's configuration (ConsumerKey empty: none).
	Daraja           mpesa.DarajaConfig
	DarajaQueryAfter time.Duration // a prompt with no callback for this long is queried
	// DarajaB2CPause is how long B2C sends stop after one whose outcome is unknown
	// (a timeout, a 5xx): an outage leaves at most one payout in doubt per pause.
	DarajaB2CPause time.Duration
	// SMTPURL is the mail server of pay-request emails; empty runs the embedded
	// SMTP sink on SMTPSinkAddr instead.
	SMTPURL, SMTPSinkAddr string
	// PublicBaseURL is how customers reach this service: the root of every checkout
	// link in API responses and emails. Never taken from a request's Host header, which
	// the caller controls.
	PublicBaseURL string
	// RelayPoll is how often the relay looks at the outbox unless an engine in its own
	// process woke it (relay.DefaultPoll).
	RelayPoll time.Duration
	// Retention bounds the tables that grow with traffic.
	Retention Retention
	// ReminderInterval is how often due pay-request reminders are looked for.
	ReminderInterval time.Duration
	// Webhooks tunes the dispatcher role.
	Webhooks dispatch.Config
	// WebhookCAFile holds PEM certificates trusted for webhook endpoints in addition
	// to the system roots (a private CA, or a test receiver's).
	WebhookCAFile string
	// CardClearingDelay is how long card collections take to clear (their funds
	// count in current_balance at once, in available_balance after this).
	CardClearingDelay, CardClearingInterval time.Duration
	// SimCardDelay paces the sandbox card simulator.
	SimCardDelay time.Duration
	// SimPayoutDelay is the sandbox payout rails' time from submission to outcome.
	SimPayoutDelay time.Duration
	// SimAggregateDelay paces registered aggregates' sandbox rails (refunds: the
	// time from request to the rail's outcome).
	SimAggregateDelay time.Duration
	// SubscriptionTick is how often the rails role's subscription scheduler looks
	// for due cycles (wall clock and sandbox test clocks); 0 turns it off.
	SubscriptionTick time.Duration
	// DBGaugesEvery is the most often a scrape of /metrics reads the database for
	// the rails and dispatcher roles' gauges (gauges.go); scrapes in between are
	// answered from the last read.
	DBGaugesEvery time.Duration
	// PayoutRecoverAfter is how long a payout waits for its outcome before the
	// rails role submits it again (a rails process died holding it).
	PayoutRecoverAfter time.Duration
	// DrainDelay is how long a stopping process stays not-ready (/readyz 503)
	// while it still serves, before it closes its listener: longer than the load
	// balancer's probe interval, so no new request reaches a closed port.
	DrainDelay time.Duration
	// Tracing is what the standard OTEL_* variables say about traces: off unless
	// they ask for an OTLP exporter (tracing.FromEnv).
	Tracing tracing.Config
	// LedgerAudit schedules the relay role's continuous ledger audit.
	LedgerAudit LedgerAudit
	// Aggregates is the list of aggregates the roles run; nil (what FromEnv
	// gives, there is no variable) is Aggregates(API.Fees, API.Rates). Tests add a test-only kind.
	Aggregates []Aggregate
}

// HTTPTimeouts bound the public listener's connections (api/deadline): a body of
// n bytes must arrive within Read + n/BodyMinRate, an answer be written within
// Write of the body's end, and an idle kept-alive connection close after Idle.
type HTTPTimeouts struct {
	Read, Write, Idle time.Duration
	BodyMinRate       int64 // bytes per second
}

// FromEnv reads the configuration from PAYSVC_* variables, with embedded defaults.
func FromEnv(getenv func(string) string) (Config, error) {
	r := &envReader{getenv: getenv}
	get, num, dur := r.get, r.num, r.dur
	host, _ := os.Hostname()
	c := Config{
		HTTPAddr:  get("PAYSVC_HTTP_ADDR", "127.0.0.1:8080"),
		AdminAddr: get("PAYSVC_ADMIN_ADDR", DefaultAdminAddr),
		HTTP: HTTPTimeouts{Read: dur("PAYSVC_HTTP_READ_TIMEOUT", 10*time.Second), Write: dur("PAYSVC_HTTP_WRITE_TIMEOUT", time.Minute),
			Idle: dur("PAYSVC_HTTP_IDLE_TIMEOUT", 2*time.Minute), BodyMinRate: int64(num("PAYSVC_HTTP_BODY_MIN_RATE", 8192))},
		DatabaseURL:           get("PAYSVC_DATABASE_URL", r.defaultDatabaseURL()),
		KafkaPort:             int(num("PAYSVC_KAFKA_PORT", 9092)),
		DataDir:               get("PAYSVC_DATA_DIR", ".data"),
		Environment:           get("PAYSVC_ENVIRONMENT", "sandbox"),
		Roles:                 splitList(get("PAYSVC_ROLES", strings.Join(AllRoles, ","))),
		CommandPartitions:     int32(num("PAYSVC_COMMAND_PARTITIONS", 8)),
		CommandRetention:      dur("PAYSVC_COMMAND_RETENTION", topics.DefaultCommandRetention),
		EventRetention:        dur("PAYSVC_EVENT_RETENTION", topics.DefaultEventRetention),
		InstanceID:            get("PAYSVC_INSTANCE_ID", fmt.Sprintf("%s-%d-%s", host, os.Getpid(), strings.ToLower(ids.Alias(4)))),
		SessionTimeout:        dur("PAYSVC_ENGINE_SESSION_TIMEOUT", 10*time.Second),
		EngineIdleAfter:       dur("PAYSVC_ENGINE_IDLE_AFTER", 2*time.Minute),
		DrainDelay:            dur("PAYSVC_SHUTDOWN_DRAIN_DELAY", 0),
		KafkaSyncWrites:       r.flag("PAYSVC_KAFKA_SYNC_WRITES"),
		AcceptCommandLogReset: r.flag("PAYSVC_ACCEPT_COMMAND_LOG_RESET"),
		AllowEmbeddedKafka:    r.flag("PAYSVC_ALLOW_EMBEDDED_KAFKA"),
		AllowSMTPSink:         r.flag("PAYSVC_ALLOW_SMTP_SINK"),
		LogFormat:             get("PAYSVC_LOG_FORMAT", "auto"),
		DBMaxConns:            int(num("PAYSVC_DB_MAX_CONNS", 0)),
		SimAcceptDelay:        dur("PAYSVC_SIM_ACCEPT_DELAY", time.Second),
		SimFinalDelay:         dur("PAYSVC_SIM_FINAL_DELAY", 2*time.Second),
		SimRecoverAfter:       dur("PAYSVC_SIM_RECOVER_AFTER", 30*time.Second),
		API: api.Config{
			RateLimit:      num("PAYSVC_RATE_LIMIT", 1000),
			RateBurst:      int(num("PAYSVC_RATE_BURST", 2000)),
			BodyLimit:      int64(num("PAYSVC_BODY_LIMIT_BYTES", 1<<20)),
			ReplyTimeout:   dur("PAYSVC_REPLY_TIMEOUT", 10*time.Second),
			IdempotencyTTL: dur("PAYSVC_IDEMPOTENCY_TTL", 24*time.Hour),
			MaxInFlight:    int(num("PAYSVC_MAX_IN_FLIGHT", 20000)),
			RequestLogRate: num("PAYSVC_REQUEST_LOG_RATE", 1000),
		},
	}
	var err error
	if c.API.Fees, err = tariff.ParseSchedule(get("PAYSVC_FEES", tariff.DefaultSchedule().String())); err != nil {
		r.fail(fmt.Errorf("PAYSVC_FEES: %w", err))
	}
	if c.API.Rates, err = tariff.ParseRates(get("PAYSVC_FX_RATES", tariff.DefaultRates().String())); err != nil {
		r.fail(fmt.Errorf("PAYSVC_FX_RATES: %w", err))
	}
	if b := get("PAYSVC_KAFKA_BROKERS", ""); b != "" {
		c.KafkaBrokers = splitList(b)
	}
	c.KafkaNamespace = topics.Namespace(get("PAYSVC_KAFKA_NAMESPACE", ""))
	if err := c.LogLevel.UnmarshalText([]byte(get("PAYSVC_LOG_LEVEL", "info"))); err != nil {
		r.fail(fmt.Errorf("PAYSVC_LOG_LEVEL: %w", err))
	}
	c.API.Environment = c.Environment
	r.daraja(&c)
	r.intervals(&c)
	c.API.ReminderDay = dur("PAYSVC_REMINDER_DAY", 24*time.Hour)
	c.API.ConsoleIdle = dur("PAYSVC_CONSOLE_IDLE_TIMEOUT", 30*time.Minute)
	c.API.ConsoleMaxAge = dur("PAYSVC_CONSOLE_MAX_AGE", 12*time.Hour)
	c.API.MailFrom = get("PAYSVC_MAIL_FROM", "payments@paysvc.local")
	c.API.WebhookAllowPrivate = r.flag("PAYSVC_WEBHOOK_ALLOW_PRIVATE")
	c.Webhooks = dispatch.Config{MaxAttempts: int(num("PAYSVC_WEBHOOK_MAX_ATTEMPTS", 8)),
		RetryBase: dur("PAYSVC_WEBHOOK_RETRY_BASE", 10*time.Second), RetryMax: dur("PAYSVC_WEBHOOK_RETRY_MAX", time.Hour),
		Threshold: int(num("PAYSVC_WEBHOOK_FAILURE_THRESHOLD", 20)), MailFrom: c.API.MailFrom,
		Lease: dur("PAYSVC_WEBHOOK_LEASE", time.Minute)}
	c.WebhookCAFile = get("PAYSVC_WEBHOOK_CA_FILE", "")
	if c.Tracing, err = tracing.FromEnv(getenv); err != nil {
		r.fail(err)
	}
	c.LedgerAudit = LedgerAudit{Interval: dur("PAYSVC_LEDGER_AUDIT_INTERVAL", time.Minute),
		FullInterval: dur("PAYSVC_LEDGER_AUDIT_FULL_INTERVAL", 24*time.Hour)}
	if err := errors.Join(r.errs...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// envReader reads the PAYSVC_ variables, gathering every malformed value so
// that one start names them all.
type envReader struct {
	getenv func(string) string
	errs   []error
}

func (r *envReader) fail(err error) { r.errs = append(r.errs, err) }

// get is k's value, trimmed, or def when unset or blank. Any variable may
// instead be given as the path of a file holding it, in k_FILE (secrets mounted
// by an orchestrator); both at once is refused, and so is a file that cannot be
// read. The error names the variable and the path, never the value.
func (r *envReader) get(k, def string) string {
	v := strings.TrimSpace(r.getenv(k))
	if path := strings.TrimSpace(r.getenv(k + "_FILE")); path != "" {
		if v != "" {
			r.fail(fmt.Errorf("%s and %s_FILE are both set: set one", k, k))
			return v
		}
		b, err := os.ReadFile(path)
		if err != nil {
			r.fail(fmt.Errorf("%s_FILE: cannot read %s: %w", k, path, errors.Unwrap(err)))
			return def
		}
		v = strings.TrimSpace(string(b)) // the newline `echo secret > file` leaves
	}
	if v != "" {
		return v
	}
	return def
}

// flag is a boolean variable, unset meaning false. Only the words below are
// taken: a value such as "ture" or "enabled" stops the start and names the
// variable, instead of silently meaning false.
func (r *envReader) flag(k string) bool {
	switch v := strings.ToLower(r.get(k, "false")); v {
	case "true", "1", "yes", "on":
		return true
	case "false", "0", "no", "off":
		return false
	}
	r.fail(fmt.Errorf("%s: not a boolean (true or false)", k))
	return false
}

// defaultDatabaseURL is the private cluster `make pg` starts, on the port the
// Makefile gives it (PAYSVC_PG_PORT, default 55432), so `paysvc merchant create`
// after `PAYSVC_PG_PORT=55499 make run` writes where that server runs.
func (r *envReader) defaultDatabaseURL() string {
	port := r.get("PAYSVC_PG_PORT", "")
	if port == "" {
		return DefaultDatabaseURL
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		r.fail(errors.New("PAYSVC_PG_PORT: not a port number"))
		return DefaultDatabaseURL
	}
	return strings.Replace(DefaultDatabaseURL, ":55432/", ":"+port+"/", 1)
}

func (r *envReader) num(k string, def float64) float64 {
	v, err := strconv.ParseFloat(r.get(k, strconv.FormatFloat(def, 'f', -1, 64)), 64)
	if err != nil {
		r.fail(fmt.Errorf("%s: not a number", k))
	}
	return v
}

func (r *envReader) dur(k string, def time.Duration) time.Duration {
	v, err := time.ParseDuration(r.get(k, def.String()))
	if err != nil {
		r.fail(fmt.Errorf("%s: not a duration (e.g. 10s)", k))
	}
	return v
}

// daraja reads the M-Pesa rail's settings and the callers' budgets of the edge.
func (r *envReader) daraja(c *Config) {
	// A live server has no default Daraja root: the one a sandbox server uses is
	// Safaricom's sandbox, whose outcomes must never count as live payments
	// (CheckStandIns refuses a live start without one).
	darajaDefault := DarajaSandboxURL
	if c.Environment == "live" {
		darajaDefault = ""
	}
	c.AllowDarajaNonProduction = r.flag("PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE")
	c.Daraja = mpesa.DarajaConfig{
		BaseURL: r.get("PAYSVC_DARAJA_BASE_URL", darajaDefault), ConsumerKey: r.get("PAYSVC_DARAJA_CONSUMER_KEY", ""),
		ConsumerSecret: r.get("PAYSVC_DARAJA_CONSUMER_SECRET", ""), ShortCode: r.get("PAYSVC_DARAJA_SHORTCODE", ""),
		Passkey: r.get("PAYSVC_DARAJA_PASSKEY", ""), B2CInitiatorName: r.get("PAYSVC_DARAJA_B2C_INITIATOR", ""),
		B2CSecurityCredential: r.get("PAYSVC_DARAJA_B2C_SECURITY_CREDENTIAL", ""), B2CShortcode: r.get("PAYSVC_DARAJA_B2C_SHORTCODE", ""),
	}
	c.API.AddrRateLimit = r.num("PAYSVC_RATE_LIMIT_IP", 50)
	c.API.AddrRateBurst = int(r.num("PAYSVC_RATE_BURST_IP", 200))
	c.API.CallbackRateLimit = r.num("PAYSVC_RATE_LIMIT_CALLBACKS", 500)
	c.API.CallbackRateBurst = int(r.num("PAYSVC_RATE_BURST_CALLBACKS", 1000))
	var err error
	if c.API.TrustedProxies, err = parseProxies(r.get("PAYSVC_TRUSTED_PROXIES", "")); err != nil {
		r.fail(fmt.Errorf("PAYSVC_TRUSTED_PROXIES: %w", err))
	}
	c.API.DarajaCallbackToken = r.get("PAYSVC_DARAJA_CALLBACK_TOKEN", "")
	if base := r.get("PAYSVC_DARAJA_CALLBACK_BASE_URL", ""); base != "" && c.API.DarajaCallbackToken != "" {
		c.Daraja.CallbackURL = strings.TrimSuffix(base, "/") + "/api/v1/payment/mpesa/callback/" + c.API.DarajaCallbackToken
		c.Daraja.B2CResultURL = strings.TrimSuffix(base, "/") + "/api/v1/send-money/mpesa/result/" + c.API.DarajaCallbackToken
		c.Daraja.B2CTimeoutURL = strings.TrimSuffix(base, "/") + "/api/v1/send-money/mpesa/timeout/" + c.API.DarajaCallbackToken
		c.Daraja.B2CStatusURL = strings.TrimSuffix(base, "/") + "/api/v1/send-money/mpesa/status/" + c.API.DarajaCallbackToken
	}
}

// intervals reads the rails', simulators' and periodic jobs' timings.
func (r *envReader) intervals(c *Config) {
	c.DarajaQueryAfter = r.dur("PAYSVC_DARAJA_QUERY_AFTER", time.Minute)
	c.DarajaB2CPause = r.dur("PAYSVC_DARAJA_B2C_PAUSE", 30*time.Second)
	c.SMTPURL = r.get("PAYSVC_SMTP_URL", "")
	c.SMTPSinkAddr = r.get("PAYSVC_SMTP_SINK_ADDR", "127.0.0.1:2525")
	// Empty: http:// and the address actually listened on (known only after listening,
	// which matters when PAYSVC_HTTP_ADDR asks for port 0).
	c.PublicBaseURL = strings.TrimSuffix(r.get("PAYSVC_PUBLIC_BASE_URL", ""), "/")
	c.ReminderInterval = r.dur("PAYSVC_REMINDER_INTERVAL", time.Minute)
	c.RelayPoll = r.dur("PAYSVC_RELAY_POLL", relay.DefaultPoll)
	c.Retention = Retention{Interval: r.dur("PAYSVC_RETENTION_INTERVAL", 10*time.Minute),
		CommandReplies: r.dur("PAYSVC_COMMAND_REPLY_RETENTION", 7*24*time.Hour),
		WebhookEvents:  r.dur("PAYSVC_WEBHOOK_EVENT_RETENTION", 30*24*time.Hour)}
	c.CardClearingDelay = r.dur("PAYSVC_CARD_CLEARING_DELAY", 48*time.Hour)
	c.CardClearingInterval = r.dur("PAYSVC_CARD_CLEARING_INTERVAL", time.Minute)
	c.SimCardDelay = r.dur("PAYSVC_SIM_CARD_DELAY", time.Second)
	c.SimPayoutDelay = r.dur("PAYSVC_SIM_PAYOUT_DELAY", 2*time.Second)
	c.SimAggregateDelay = r.dur("PAYSVC_SIM_AGGREGATE_DELAY", 10*time.Second)
	c.PayoutRecoverAfter = r.dur("PAYSVC_PAYOUT_RECOVER_AFTER", 2*time.Minute)
	c.SubscriptionTick = r.dur("PAYSVC_SUBSCRIPTION_TICK", time.Second)
	c.DBGaugesEvery = r.dur("PAYSVC_DB_GAUGES_EVERY", 30*time.Second)
}

// parseProxies reads a comma-separated list of CIDRs (a bare address is its /32 or
// /128).
func parseProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range splitList(v) {
		if !strings.Contains(p, "/") {
			a, err := netip.ParseAddr(p)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or CIDR", p)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pr, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address or CIDR", p)
		}
		out = append(out, netip.PrefixFrom(pr.Addr().Unmap(), pr.Bits()).Masked())
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Validate names the first bad field.
func (c Config) Validate() error {
	if c.DBMaxConns < 0 || (c.DBMaxConns > 0 && c.DBMaxConns < minDBConns(c)) {
		return fmt.Errorf("PAYSVC_DB_MAX_CONNS: %d is too few for roles %s (at least %d; 0 sizes the pools from the roles)",
			c.DBMaxConns, strings.Join(c.Roles, ","), minDBConns(c))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return fmt.Errorf("PAYSVC_HTTP_ADDR: %q is not host:port", c.HTTPAddr)
	}
	if c.AdminAddr != AdminOff {
		if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
			return fmt.Errorf("PAYSVC_ADMIN_ADDR: %q is not host:port (or %s)", c.AdminAddr, AdminOff)
		}
	}
	if c.Environment != "sandbox" && c.Environment != "live" {
		return fmt.Errorf("PAYSVC_ENVIRONMENT: must be sandbox or live, not %q", c.Environment)
	}
	if len(c.Roles) == 0 {
		return errors.New("PAYSVC_ROLES: at least one role")
	}
	for _, r := range c.Roles {
		if !slices.Contains(AllRoles, r) {
			return fmt.Errorf("PAYSVC_ROLES: unknown role %q (known: %s)", r, strings.Join(AllRoles, ", "))
		}
	}
	if c.CommandPartitions < 1 || c.CommandPartitions > 1024 {
		return errors.New("PAYSVC_COMMAND_PARTITIONS: must be 1..1024")
	}
	// Shorter than a day leaves an on-call engineer too little time to bring a
	// stopped engine back before the commands it has not applied are deleted.
	if c.CommandRetention < 24*time.Hour || c.EventRetention < time.Hour {
		return errors.New("PAYSVC_COMMAND_RETENTION must be >= 24h and PAYSVC_EVENT_RETENTION >= 1h")
	}
	if c.KafkaPort < 0 || c.KafkaPort > 65535 {
		return errors.New("PAYSVC_KAFKA_PORT: must be 0..65535")
	}
	if err := c.KafkaNamespace.Validate(); err != nil {
		return fmt.Errorf("PAYSVC_KAFKA_NAMESPACE: %w", err)
	}
	if c.API.RateLimit < 0 {
		return errors.New("PAYSVC_RATE_LIMIT: must be >= 0 (0 disables)")
	}
	if c.API.AddrRateLimit < 0 || c.API.CallbackRateLimit < 0 {
		return errors.New("PAYSVC_RATE_LIMIT_IP, PAYSVC_RATE_LIMIT_CALLBACKS: must be >= 0 (0 disables)")
	}
	if c.API.BodyLimit < 1024 {
		return errors.New("PAYSVC_BODY_LIMIT_BYTES: must be >= 1024")
	}
	if c.HTTP.Read < time.Second || c.HTTP.Idle < time.Second {
		return errors.New("PAYSVC_HTTP_READ_TIMEOUT and PAYSVC_HTTP_IDLE_TIMEOUT: must be >= 1s")
	}
	if c.HTTP.BodyMinRate < 100 {
		return errors.New("PAYSVC_HTTP_BODY_MIN_RATE: must be >= 100 (bytes per second)")
	}
	// A write's handler waits up to the reply timeout for the engine; cutting its
	// connection first would turn every slow answer into a dropped one.
	if c.HTTP.Write < c.API.ReplyTimeout+10*time.Second {
		return errors.New("PAYSVC_HTTP_WRITE_TIMEOUT: must be >= PAYSVC_REPLY_TIMEOUT + 10s")
	}
	if c.SessionTimeout < time.Second {
		return errors.New("PAYSVC_ENGINE_SESSION_TIMEOUT: must be >= 1s")
	}
	if c.DrainDelay < 0 || c.DrainDelay > time.Minute {
		return errors.New("PAYSVC_SHUTDOWN_DRAIN_DELAY: must be between 0s and 1m")
	}
	if c.EngineIdleAfter < time.Second {
		// Shorter would rehydrate the same wallets over and over under steady load.
		return errors.New("PAYSVC_ENGINE_IDLE_AFTER: must be >= 1s")
	}
	if c.Retention.Interval <= 0 {
		return errors.New("PAYSVC_RETENTION_INTERVAL: must be > 0")
	}
	// Within a key's lifetime its own record answers a retry; the stored reply must
	// outlive it, so a retry never meets an emptied reply before the key expires.
	if c.Retention.CommandReplies < c.API.IdempotencyTTL {
		return errors.New("PAYSVC_COMMAND_REPLY_RETENTION: must be >= PAYSVC_IDEMPOTENCY_TTL")
	}
	if c.Retention.WebhookEvents <= 0 {
		return errors.New("PAYSVC_WEBHOOK_EVENT_RETENTION: must be > 0")
	}
	if c.LedgerAudit.Interval < 0 || c.LedgerAudit.FullInterval < c.LedgerAudit.Interval {
		return errors.New("PAYSVC_LEDGER_AUDIT_INTERVAL, PAYSVC_LEDGER_AUDIT_FULL_INTERVAL: must be >= 0 (0 turns the audit off), the full interval at least the interval")
	}
	if !slices.Contains([]string{"auto", "json", "text"}, c.LogFormat) {
		return errors.New("PAYSVC_LOG_FORMAT: must be auto, json or text")
	}
	return c.validateDarajaToken()
}

// MinCallbackTokenLen is the shortest PAYSVC_DARAJA_CALLBACK_TOKEN accepted: the
// token is the only thing that authenticates Daraja's callbacks (Daraja signs
// nothing), and whoever holds it can post payment and payout results, so it must
// be as hard to guess as a key (32 characters of `openssl rand -hex 16` is 128 bits).
const MinCallbackTokenLen = 32

// validateDarajaToken checks the callback token. The error names the variable and
// never quotes the token. An empty token is allowed: the callback routes then answer
// 404, which is right for a server that does not use Daraja. The token is not tied
// to PAYSVC_DARAJA_CONSUMER_KEY because API processes receive the callbacks of a
// rails process elsewhere and hold no Daraja credentials themselves; but a rails
// process that sends through Daraja without a callback URL would send requests
// whose outcomes can never come back.
func (c Config) validateDarajaToken() error {
	tok := c.API.DarajaCallbackToken
	if tok != "" && len(tok) < MinCallbackTokenLen {
		return fmt.Errorf("PAYSVC_DARAJA_CALLBACK_TOKEN: must be at least %d characters (it is %d); generate one with `openssl rand -hex 32`",
			MinCallbackTokenLen, len(tok))
	}
	for _, r := range tok {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			// It is a path segment of the callback URLs: anything else breaks them.
			return errors.New("PAYSVC_DARAJA_CALLBACK_TOKEN: only letters, digits, '-' and '_'")
		}
	}
	if c.Has(RoleRails) && c.Daraja.ConsumerKey != "" && (tok == "" || c.Daraja.CallbackURL == "") {
		return errors.New("PAYSVC_DARAJA_CALLBACK_TOKEN and PAYSVC_DARAJA_CALLBACK_BASE_URL: both required with PAYSVC_DARAJA_CONSUMER_KEY (Daraja posts its results there)")
	}
	return nil
}

// DarajaSandboxURL is a sandbox server's Daraja root (PAYSVC_DARAJA_BASE_URL's
// default there); DarajaProductionHost is the only host a live server sends to
// without PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE.
const (
	DarajaSandboxURL     = "https://sandbox.safaricom.co.ke"
	DarajaProductionHost = "api.safaricom.co.ke"
)

// checkLiveDaraja refuses a live server with Daraja credentials whose Daraja
// root is not set, or is not Safaricom's production API over https, unless the
// operator opted in by name. Any other host is refused, not just the sandbox's:
// a typo, a test double or a proxy left from staging would equally stamp
// outcomes that are not live ones as real payments. A process without a
// consumer key sends nothing to Daraja and is not checked.
func (c Config) checkLiveDaraja() error {
	if c.Environment != "live" || c.Daraja.ConsumerKey == "" {
		return nil
	}
	if strings.TrimSpace(c.Daraja.BaseURL) == "" {
		return errors.New("PAYSVC_DARAJA_BASE_URL: a live server with Daraja credentials needs it set explicitly (https://" +
			DarajaProductionHost + "); there is no default in live, the sandbox's outcomes are not payments")
	}
	if c.AllowDarajaNonProduction || c.DarajaIsProduction() {
		return nil
	}
	return fmt.Errorf("PAYSVC_DARAJA_BASE_URL: a live server sends only to https://%s, not %q "+
		"(set PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE=true to run live on another Daraja host all the same)",
		DarajaProductionHost, redactedURL(c.Daraja.BaseURL))
}

// redactedURL is a URL fit for an error message: a password in it is masked (a
// root with credentials is refused, and the refusal must not print them).
func redactedURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// DarajaIsProduction reports whether the Daraja root is Safaricom's production
// API over https.
func (c Config) DarajaIsProduction() bool {
	u, err := url.Parse(strings.TrimSpace(c.Daraja.BaseURL))
	return err == nil && u.Scheme == "https" && strings.EqualFold(u.Hostname(), DarajaProductionHost) &&
		(u.Port() == "" || u.Port() == "443") && u.User == nil
}

// Has reports whether the process runs a role.
func (c Config) Has(role string) bool { return slices.Contains(c.Roles, role) }

// CheckStandIns refuses a live server on the development stand-ins (the
// embedded broker, the SMTP sink, a Daraja that is not production's) unless the
// operator opted in by name. Start checks it, not Validate: admin commands
// (merchant create, migrate) of a live configuration need neither Kafka nor mail.
func (c Config) CheckStandIns() error {
	if c.Environment != "live" {
		return nil
	}
	if len(c.KafkaBrokers) == 0 && !c.AllowEmbeddedKafka {
		return errors.New("PAYSVC_KAFKA_BROKERS: a live server needs a Kafka cluster; the embedded broker is for development " +
			"(set PAYSVC_ALLOW_EMBEDDED_KAFKA=true to run live on it all the same)")
	}
	if c.SendsMail() && c.SMTPURL == "" && !c.AllowSMTPSink {
		return errors.New("PAYSVC_SMTP_URL: a live server with the api or dispatcher role needs a mail server; the embedded " +
			"SMTP sink delivers nothing (set PAYSVC_ALLOW_SMTP_SINK=true to run live on it all the same)")
	}
	return c.checkLiveDaraja()
}

// SendsMail reports whether the process sends mail (pay requests, webhook
// failure warnings): its api and dispatcher roles do.
func (c Config) SendsMail() bool { return c.Has(RoleAPI) || c.Has(RoleDispatcher) }

// KafkaDir is where the embedded Kafka persists its log.
func (c Config) KafkaDir() string { return filepath.Join(c.DataDir, "kafka") }

// Redacted is the configuration as it may be printed: the database password and
// the Daraja callback token masked (mpesa.MaskToken), Daraja's credentials left out.
func (c Config) Redacted() map[string]any {
	return map[string]any{
		"http_addr": c.HTTPAddr, "admin_addr": c.AdminAddr, "database_url": redactURL(c.DatabaseURL), "kafka_brokers": c.KafkaBrokers,
		"kafka_port": c.KafkaPort, "data_dir": c.DataDir, "environment": c.Environment, "roles": c.Roles,
		"db_max_conns": c.DBConns(), "allow_embedded_kafka": c.AllowEmbeddedKafka, "allow_smtp_sink": c.AllowSMTPSink,
		"daraja_base_url": c.Daraja.BaseURL, "daraja_allow_sandbox_in_live": c.AllowDarajaNonProduction,
		"command_partitions": c.CommandPartitions, "instance_id": c.InstanceID,
		"kafka_namespace": string(c.KafkaNamespace), "command_retention": c.CommandRetention.String(),
		"event_retention": c.EventRetention.String(),
		"rate_limit":      c.API.RateLimit, "rate_burst": c.API.RateBurst, "rate_limit_ip": c.API.AddrRateLimit,
		"rate_burst_ip": c.API.AddrRateBurst, "rate_limit_callbacks": c.API.CallbackRateLimit,
		"rate_burst_callbacks": c.API.CallbackRateBurst, "trusted_proxies": c.API.TrustedProxies,
		"daraja_configured": c.Daraja.ConsumerKey != "", "daraja_callback_url": mpesa.MaskToken(c.Daraja.CallbackURL),
		"daraja_callback_token_set": c.API.DarajaCallbackToken != "",
	}
}

func redactURL(raw string) string {
	i := strings.Index(raw, "://")
	at := strings.LastIndex(raw, "@")
	if i < 0 || at < i {
		return raw
	}
	creds := raw[i+3 : at]
	if user, _, ok := strings.Cut(creds, ":"); ok {
		return raw[:i+3] + user + ":xxxxx" + raw[at:]
	}
	return raw
}
