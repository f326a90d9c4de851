package api

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/aggregates/tariff"
	"paysvc/actors/engine/replies"
	"paysvc/actors/outbound/mail"
	"paysvc/actors/outbound/webhooks/outbound"
	"paysvc/actors/values/ids"
	"paysvc/api/console"
	"paysvc/api/edge"
	"paysvc/api/openapi"
	"paysvc/api/pages"
	"paysvc/api/sandbox"
	"paysvc/storage"
	"paysvc/topics"
)

// Context keys.
const (
	ctxCommandID = "paysvc.command_id"
	ctxSignature = "paysvc.signature"
)

// Config is the API's part of the service configuration.
type Config struct {
	Environment    string        // sandbox or live
	BodyLimit      int64         // bytes
	RateLimit      float64       // requests per second per key; 0 disables every limit
	RateBurst      int           // bucket size per key
	ReplyTimeout   time.Duration // how long a write waits for the engine
	MaxInFlight    int           // commands waiting for replies, per instance
	IdempotencyTTL time.Duration // how long Idempotency-Key records are kept
	KeyCacheTTL    time.Duration // how long a key lookup is reused (bounds revocation delay)
	// RequestLogRate is how many request lines a second this instance writes
	// before it samples out successful ones (requestlog.go); 0 writes every one.
	RequestLogRate float64
	// NewID, nil in a service (ids.Alias), draws the alias ids of new resources
	// (newids.go): a test sets it to draw an id already in use.
	NewID func(n int) string
	Fees  *tariff.Schedule
	Rates *tariff.Rates // converts collections in other currencies to KES
	// ReminderDay is how long a "day" of autosend_reminder is (24h; shorter only to
	// exercise reminders in tests and sandbox demos).
	ReminderDay time.Duration
	// Now is the clock of the key cache and of reminders (nil: time.Now); a test
	// drives it to outlive a cached key or a reminder's day without waiting.
	Now func() time.Time
	// PublicBaseURL is the root of checkout links (no trailing slash). Required: a
	// request's Host header is the caller's to choose, so links are never built from it.
	PublicBaseURL string
	// MailFrom is the sender address of pay-request emails.
	MailFrom string
	// WebhookAllowPrivate lets webhook endpoints be plain HTTP and private or
	// loopback addresses (sandbox only, for local development).
	WebhookAllowPrivate bool
	// WebhookRootCAs is the trust for webhook endpoints (nil: the system roots).
	WebhookRootCAs *x509.CertPool
	// DarajaCallbackToken is the secret path part of the M-Pesa callback URL given to
	// Daraja; empty: no callback endpoint.
	DarajaCallbackToken string

	// AddrRateLimit and AddrRateBurst budget each client address for calls without a
	// secret key (open routes, public keys, signatures, failed authentications).
	AddrRateLimit float64
	AddrRateBurst int
	// CallbackRateLimit and CallbackRateBurst budget the payment providers' callbacks
	// (valid path token), apart from everything else.
	CallbackRateLimit float64
	CallbackRateBurst int
	// TrustedProxies are the proxies whose X-Forwarded-For is believed (empty: the
	// socket peer is the client).
	TrustedProxies []netip.Prefix
	// LinkHolds bound how long an unfinished payment holds a use of a payment
	// link (zero fields: storage.DefaultLinkHolds). LinkLimits budget sessions and
	// prompts per link and per client address (zero fields: defaultLinkLimits;
	// RateLimit 0 disables them with every other limit). paymentlinks.go.
	LinkHolds  storage.LinkHolds
	LinkLimits LinkLimits
	// ConsoleIdle and ConsoleMaxAge end a merchant console session after that long
	// without a request, and that long after sign-in whatever happens.
	ConsoleIdle   time.Duration
	ConsoleMaxAge time.Duration
}

func (c *Config) defaults() {
	if c.Environment == "" {
		c.Environment = "sandbox"
	}
	if c.BodyLimit <= 0 {
		c.BodyLimit = 1 << 20
	}
	if c.RateBurst <= 0 {
		c.RateBurst = max(int(c.RateLimit), 1)
	}
	if c.ReplyTimeout <= 0 {
		c.ReplyTimeout = 10 * time.Second
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 20000
	}
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.KeyCacheTTL <= 0 {
		c.KeyCacheTTL = 2 * time.Second
	}
	if c.Fees == nil {
		c.Fees = tariff.DefaultSchedule()
	}
	if c.Rates == nil {
		c.Rates = tariff.DefaultRates()
	}
	if c.ReminderDay <= 0 {
		c.ReminderDay = 24 * time.Hour
	}
	if c.ConsoleIdle <= 0 {
		c.ConsoleIdle = 30 * time.Minute
	}
	if c.ConsoleMaxAge <= 0 {
		c.ConsoleMaxAge = 12 * time.Hour
	}
	if c.LinkHolds.Send <= 0 {
		c.LinkHolds.Send = storage.DefaultLinkHolds.Send
	}
	if c.LinkHolds.Accepted <= 0 {
		c.LinkHolds.Accepted = storage.DefaultLinkHolds.Accepted
	}
	c.LinkLimits.defaults()
	if c.MailFrom == "" {
		c.MailFrom = "payments@paysvc.local"
	}
}

// Deps are what the API talks to.
type Deps struct {
	DB *sqlx.DB
	// IdempotencyDB holds Idempotency-Key records. It may be a pool with
	// synchronous_commit off: losing a record in a database crash costs no
	// correctness, since the command id derived from the key is still applied once.
	IdempotencyDB *sqlx.DB
	Kafka         *kgo.Client // produces commands
	Brokers       []string    // the Kafka cluster, for sandbox listen streams
	Hub           *replies.Hub
	Mailer        mail.Sender // pay-request emails; nil: they fail with sent_status FAILED
	Sink          *mail.Sink  // the embedded SMTP sink, when the service runs one
	Log           *slog.Logger
	Ready         func() bool
	// Namespace prefixes the topics on the cluster (topics.Namespace): those of
	// the commands the API produces and of the events listen streams read.
	Namespace topics.Namespace
	// STKQuery asks Daraja for a prompt's outcome: the second proof of an STK
	// callback that lacks a valid per-prompt MAC (callbacks.go). nil: such a
	// callback changes nothing (the rails role's status query finds the outcome).
	STKQuery STKQuerier
}

// Server is the HTTP API.
type Server struct {
	cfg      Config
	db       *sqlx.DB
	idemDB   *sqlx.DB
	kafka    *kgo.Client
	ns       topics.Namespace // of every topic the API produces to or reads
	hub      *replies.Hub
	log      *slog.Logger
	reqlog   *requestLog
	auth     *authenticator
	limits   *limits
	links    *linkLimiters // sessions and prompts of payment links (linklimits.go)
	inflight chan struct{}
	echo     *echo.Echo
	ready    func() bool
	sig      *signer
	mailer   mail.Sender
	// validateEndpoint checks a webhook endpoint at configuration time.
	validateEndpoint func(string) error
	webhookClient    *outbound.Client // replays
	sandbox          *sandbox.Tools   // the sandbox's developer tools
	console          *console.Console // the merchant console at /console/
	pages            *pages.Pages     // the hosted customer pages
	// declared is every route's access, keyed "METHOD path" (routes, permissions.go).
	declared map[string]access
	// openapi is the description of the routes, built from declared (openapi.go).
	openapi *openapi.Document
	// setupKey signs subscription setup tokens (subscriptions.go).
	setupKey setupKey
	// stkQuery and stkKey prove STK callbacks (callbacks.go).
	stkQuery STKQuerier
	stkKey   setupKey
}

// New builds the API.
func New(cfg Config, d Deps) *Server {
	cfg.defaults()
	if d.IdempotencyDB == nil {
		d.IdempotencyDB = d.DB
	}
	s := &Server{
		cfg: cfg, db: d.DB, idemDB: d.IdempotencyDB, kafka: d.Kafka, ns: d.Namespace, hub: d.Hub, log: d.Log.With("component", "api"),
		auth:     newAuthenticator(d.DB, cfg.Environment, cfg.KeyCacheTTL, cfg.Now),
		limits:   newLimits(cfg),
		links:    newLinkLimiters(cfg),
		inflight: make(chan struct{}, cfg.MaxInFlight),
		ready:    d.Ready,
		sig:      &signer{db: d.DB, env: cfg.Environment},
		mailer:   d.Mailer,
		stkQuery: d.STKQuery,
	}
	s.reqlog = newRequestLog(s.log, cfg.RequestLogRate)
	s.webhookClient = outbound.New(outbound.Options{AllowPrivate: cfg.WebhookAllowPrivate && cfg.Environment == "sandbox",
		RootCAs: cfg.WebhookRootCAs})
	s.validateEndpoint = s.webhookClient.ValidateEndpoint
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger = edge.EchoLogger(s.log)
	e.HTTPErrorHandler = s.handleError
	// Paths are served with and without their trailing slash, never redirected:
	// SDKs turn a redirected POST into a GET, and one of them follows no redirects.
	e.Pre(middleware.RemoveTrailingSlash())
	e.Use(s.requestID, s.traceRequest, s.observe, s.recoverPanics, s.connectionClose, s.limitBody, s.refuseUnstorable)
	s.console = console.New(console.Config{Environment: cfg.Environment, PublicBaseURL: cfg.PublicBaseURL, Idle: cfg.ConsoleIdle,
		MaxAge: cfg.ConsoleMaxAge}, console.Deps{
		DB:  d.DB,
		API: e,
		Verify: func(ctx context.Context, key string) (*edge.Principal, *edge.Error) {
			return s.auth.verify(ctx, key, "secret")
		},
		ForgetKey: s.auth.cache.forget,
		Asset:     pages.AssetURL,
		PlanURL:   s.planURL,
		LinkURL:   s.linkURL,
	})
	s.pages = pages.New(pages.Config{Environment: cfg.Environment, ChallengeCode: SandboxChallengeCode}, pages.Deps{
		DB: d.DB, Log: s.log, Checkout: checkouts.opener(s), Link: paymentLinks.opener(s), Plan: plans.opener(s),
		Setup: setups.opener(s), Admitted: admittedMerchant, Sign: s.checkoutSignature, MaskedPayer: s.maskedPayer,
		LinkRefusal: linkRefusal, LinkURL: s.linkURL,
	})
	s.sandbox = sandbox.New(sandbox.Deps{Environment: cfg.Environment, DB: d.DB, Kafka: d.Kafka, Brokers: d.Brokers,
		Namespace: d.Namespace, Sink: d.Sink, Log: s.log, Ready: d.Ready, Redraw: s.redraw})
	s.routes(e)
	s.openapi = s.describeRoutes()
	s.echo = e
	return s
}

// Handler is the http.Handler of the API.
func (s *Server) Handler() http.Handler { return s.echo }

// routes is the route table: every route with its declared access (permissions.go).
// Nothing is registered on e directly, so no route can skip authentication, rate
// limits or the permission check; TestEveryRouteDeclaresAccess walks the router.
func (s *Server) routes(e *echo.Echo) {
	s.declared = map[string]access{}
	r := func(method, path string, h echo.HandlerFunc, a access) { s.handle(e, method, path, h, a) }
	open := access{kind: kindOpen}

	r(GET, "/healthz", s.healthz, open)
	// The interface's own description (spec, Versioning): no credential, so a client
	// can learn what it talks to before it has keys. Also at /api/v1/ (trailing slash).
	r(GET, v1, s.apiVersion, open)
	// This interface's OpenAPI description (openapi.go), built from this table.
	r(GET, v1+"/openapi.json", s.openapiJSON, open)
	r(GET, v1+"/openapi.yaml", s.openapiYAML, open)

	r(GET, v1+"/wallets", s.listWallets, secret(edge.PermViewWallets, "list wallets"))
	r(POST, v1+"/wallets", s.createWallet, secret(edge.PermAddWallets, "create wallets").idem())
	r(GET, v1+"/wallets/:wallet_id", s.getWallet, secret(edge.PermViewWallets, "read wallets"))
	r(GET, v1+"/wallets/:wallet_id/transactions", s.walletTransactions, secret(edge.PermViewWallets, "read wallet transactions"))
	r(POST, v1+"/wallets/:wallet_id/intra_transfer", s.intraTransfer, secret(edge.PermAddTransfers, "move money between wallets").idem())

	r(POST, v1+"/payment/mpesa-stk-push", s.stkPush,
		access{kind: kindPublicOrSecret, perm: edge.PermAddCollections, what: "start collections", idempotent: true})
	r(POST, v1+"/payment/status", s.paymentStatus, access{kind: kindStatus, perm: edge.PermViewCollections, what: "read collections"})
	r(POST, v1+"/payment/collection", s.collection,
		access{kind: kindCollection, perm: edge.PermAddCollections, what: "start collections", idempotent: true})
	r(POST, v1+"/payment/card", s.cardPayment,
		access{kind: kindCollection, perm: edge.PermAddCollections, what: "start collections", idempotent: true, cardBody: true})
	r(POST, v1+"/payment/get_amount_estimate", s.amountEstimate,
		access{kind: kindPublicOrSecret, perm: edge.PermViewCollections, what: "estimate collection fees"})
	r(POST, v1+"/payment/collection/checkout", s.createCheckout, access{kind: kindPublicKey, idempotent: true})
	r(POST, v1+"/checkout", s.createCheckout, access{kind: kindPublicKey, idempotent: true})
	r(GET, "/checkout/:checkout_id", s.pages.CheckoutPage, opens(capCheckout))
	// The hosted pages' stylesheet, script and icon (api/pages): served here, so a
	// page needs no other host.
	r(GET, "/static/:name", pages.ServeStatic, open)
	r(POST, v1+"/payment/collection/pay-requests", s.createPayRequest, secret(edge.PermAddCollections, "send pay requests").idem())
	r(GET, v1+"/payment/collection/pay-requests/:request_id", s.getPayRequest, secret(edge.PermViewCollections, "read pay requests"))
	// Payment links (paymentlinks.go): merchant configuration with the secret key,
	// and each link's public page and QR code (api/pages) and the session it opens.
	r(GET, v1+"/paymentlinks", s.listPaymentLinks, secret(edge.PermViewCollections, "list payment links"))
	r(POST, v1+"/paymentlinks", s.createPaymentLink, secret(edge.PermAddCollections, "create payment links").idem())
	r(GET, v1+"/paymentlinks/:link_id", s.getPaymentLink, secret(edge.PermViewCollections, "read payment links"))
	r(PATCH, v1+"/paymentlinks/:link_id", s.updatePaymentLink, secret(edge.PermAddCollections, "change payment links"))
	r(PUT, v1+"/paymentlinks/:link_id", s.updatePaymentLink, secret(edge.PermAddCollections, "change payment links"))
	r(POST, v1+"/paymentlinks/:link_id/deactivate", s.deactivatePaymentLink, secret(edge.PermAddCollections, "change payment links"))
	r(GET, "/pay/:link_id", s.pages.LinkPage, opens(capPaymentLink))
	r(POST, "/pay/:link_id/session", s.paymentLinkSession, opens(capPaymentLink))
	r(GET, "/pay/:link_id/qr.png", s.pages.LinkQR, opens(capPaymentLink))
	r(POST, v1+"/payment/mpesa/callback/:token", s.mpesaCallback, access{kind: kindCallback})
	// Each prompt's own callback URL names its invoice (mpesa.Daraja.Push).
	r(POST, v1+"/payment/mpesa/callback/:token/:invoice", s.mpesaCallback, access{kind: kindCallback})
	// ... and carries the prompt's MAC (callbacks.go, provenSTK).
	r(POST, v1+"/payment/mpesa/callback/:token/:invoice/:mac", s.mpesaCallback, access{kind: kindCallback})

	s.subscriptionRoutes(r)

	r(GET, v1+"/webhooks", s.listWebhooks, secret(edge.PermViewWebhooks, "list webhooks"))
	r(GET, v1+"/webhooks/events", s.listWebhookEvents, secret(edge.PermViewWebhooks, "list webhook deliveries"))
	r(POST, v1+"/webhooks/events/:event_id/replay", s.replayWebhookEvent, secret(edge.PermChangeWebhooks, "replay webhook events"))
	r(POST, v1+"/webhooks", s.createWebhook, secret(edge.PermChangeWebhooks, "create webhooks").idem())
	r(GET, v1+"/webhooks/:webhook_id", s.getWebhook, secret(edge.PermViewWebhooks, "read webhooks"))
	r(PATCH, v1+"/webhooks/:webhook_id", s.updateWebhook, secret(edge.PermChangeWebhooks, "change webhooks"))
	r(DELETE, v1+"/webhooks/:webhook_id", s.deleteWebhook, secret(edge.PermChangeWebhooks, "delete webhooks"))
	r(POST, v1+"/webhooks/:webhook_id/rotate-secret", s.rotateWebhookSecret, secret(edge.PermChangeWebhooks, "rotate webhook secrets"))

	s.payoutRoutes(r)

	r(GET, v1+"/chargebacks", s.listRefunds, secret(edge.PermViewRefunds, "list refunds"))
	r(POST, v1+"/chargebacks", s.createRefund, secret(edge.PermAddRefunds, "request refunds").idem())
	r(GET, v1+"/chargebacks/:refund_id", s.getRefund, secret(edge.PermViewRefunds, "read refunds"))
	r(POST, v1+"/chargebacks/:refund_id/cancel", s.cancelRefund, secret(edge.PermAddRefunds, "cancel refunds").idem())

	sandbox := access{kind: kindSandbox}
	r(POST, v1+"/sandbox/wallets/:wallet_id/deposit", s.sandboxDeposit, sandbox.idem())
	r(GET, v1+"/sandbox/mail", s.sandbox.Mail, sandbox)
	r(GET, v1+"/events/listen", s.sandbox.ListenEvents, sandbox)
	r(POST, v1+"/events/trigger", s.sandbox.TriggerEvent, sandbox.idem())

	// The merchant console (package api/console): its own pages and forms behind a
	// session; every action it takes calls one of the routes above.
	s.console.Routes(func(method, path string, h echo.HandlerFunc, session bool) {
		a := open
		if session {
			a = access{kind: kindConsole}
		}
		r(method, path, h, a)
	})

	// Unknown paths: 404, rate limited by address like every public route.
	r(echo.RouteNotFound, "/*", func(c echo.Context) error { return edge.NotFound("Not found.") }, open)
}

// Route table shorthands: methods, the API's root, and one route's declaration.
const (
	GET, POST, PATCH, PUT, DELETE = http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete
	v1                            = "/api/v1"
)

type route func(method, path string, h echo.HandlerFunc, a access)

// subscriptionRoutes are the plans, subscription customers, subscriptions,
// their customer pages and test clocks, and the collections' customers.
func (s *Server) subscriptionRoutes(r route) {
	// Subscription plans and customers, at the spec's paths and the public service's
	// hyphenated aliases (docs/compat.md). Not money state: written directly (plans.go,
	// customers.go).
	for _, base := range []string{v1 + "/subscriptions/plans", v1 + "/subscriptions-plans"} {
		r(POST, base, s.upsertPlan, secret(edge.PermChangeSubscriptions, "create and change subscription plans").idem())
		r(GET, base, s.listPlans, secret(edge.PermViewSubscriptions, "list subscription plans"))
		r(GET, base+"/:plan_id", s.getPlan, secret(edge.PermViewSubscriptions, "read subscription plans"))
	}
	for _, base := range []string{v1 + "/subscriptions/customers", v1 + "/subscriptions-customers"} {
		r(POST, base, s.upsertSubscriptionCustomer, secret(edge.PermChangeSubscriptions, "create and change subscription customers").idem())
		r(GET, base, s.listCustomers, secret(edge.PermViewSubscriptions, "list subscription customers"))
		r(GET, base+"/:customer_id", s.getCustomer, secret(edge.PermViewSubscriptions, "read subscription customers"))
	}
	// Subscriptions (subscriptions.go): created PENDING with a setup_url; the card
	// setup endpoint is a public capability route (the token is the credential,
	// like the checkout page's id), rate limited by address.
	subs := v1 + "/subscriptions/subscriptions"
	r(POST, subs, s.createSubscription, secret(edge.PermChangeSubscriptions, "create subscriptions").idem())
	r(GET, subs, s.listSubscriptions, secret(edge.PermViewSubscriptions, "list subscriptions"))
	r(GET, subs+"/:subscription_id", s.getSubscription, secret(edge.PermViewSubscriptions, "read subscriptions"))
	r(PUT, subs+"/:subscription_id", s.updateSubscription, secret(edge.PermChangeSubscriptions, "change subscriptions").idem())
	r(POST, subs+"/:subscription_id/unsubscribe", s.unsubscribe, secret(edge.PermChangeSubscriptions, "cancel subscriptions").idem())
	r(GET, subs+"/:subscription_id/transactions", s.subscriptionTransactions, secret(edge.PermViewSubscriptions, "read subscriptions' payments"))
	r(GET, v1+"/subscriptions/setup/:token", s.setupInfo, opens(capSetupToken))
	r(POST, v1+"/subscriptions/setup/:token", s.setupCard, opens(capSetupToken))
	// The customer's subscription pages (api/pages): the setup page at setup_url
	// (its token is the capability, as the endpoint's), and a plan's subscribe page
	// at plan_url with the public POST that makes a customer and a PENDING
	// subscription (subscribe.go; rate limited by address, docs/security.md).
	r(GET, "/subscriptions/setup/:token", s.pages.SetupPage, opens(capSetupToken))
	r(GET, "/subscribe/:plan_id", s.pages.SubscribePage, opens(capPlan))
	r(POST, "/subscribe/:plan_id", s.planSubscribe, opens(capPlan))
	// Sandbox test clocks for subscriptions (api/sandbox); 404 on a live server.
	tc := v1 + "/subscriptions/test_clocks"
	r(POST, tc, s.sandbox.CreateTestClock, secret(edge.PermChangeSubscriptions, "create subscription test clocks (sandbox)"))
	r(GET, tc+"/:clock_id", s.sandbox.GetTestClock, secret(edge.PermViewSubscriptions, "read subscription test clocks (sandbox)"))
	r(POST, tc+"/:clock_id/advance", s.sandbox.AdvanceTestClock, secret(edge.PermChangeSubscriptions, "advance subscription test clocks (sandbox)"))
	// The same customer records as the payers of collections (the Python SDK's
	// customers API): collection permissions.
	r(POST, v1+"/customers", s.upsertCustomer, secret(edge.PermAddCollections, "create and change customers").idem())
	r(GET, v1+"/customers", s.listCustomers, secret(edge.PermViewCollections, "list customers"))
	r(GET, v1+"/customers/:customer_id", s.getCustomer, secret(edge.PermViewCollections, "read customers"))
	r(GET, v1+"/customers/:customer_id/transactions", s.customerTransactions, secret(edge.PermViewCollections, "read customers' payments"))
}

// payoutRoutes are the payment files (send-money) and their rails' callbacks.
func (s *Server) payoutRoutes(r route) {
	initiate := secret(edge.PermAddFiles, "create payment files").idem()
	initiate.extra = approvalRequested
	r(POST, v1+"/send-money/initiation", s.initiatePayoutFile(http.StatusCreated), initiate)
	r(POST, v1+"/send-money/initiate", s.initiatePayoutFile(http.StatusOK), initiate)
	r(POST, v1+"/send-money/approve", s.approvePayoutFile, secret(edge.PermApproveFiles, "approve payment files").idem())
	r(POST, v1+"/send-money/cancel", s.cancelPayoutFile, secret(edge.PermChangeFiles, "cancel payment files").idem())
	r(POST, v1+"/send-money/status", s.payoutStatus, secret(edge.PermViewFiles, "view payment files"))
	r(POST, v1+"/send-money/validate-account", s.validateAccount, secret(edge.PermAddFiles, "validate recipient accounts"))
	r(GET, v1+"/send-money/bank-codes/ke", s.bankCodes, access{kind: kindOpen})
	r(GET, v1+"/send-money/beneficiaries/frequently_used", s.beneficiaries, secret(edge.PermViewFiles, "list beneficiaries"))
	r(POST, v1+"/send-money/mpesa/result/:token", s.b2cResult, access{kind: kindCallback})
	r(POST, v1+"/send-money/mpesa/timeout/:token", s.b2cTimeout, access{kind: kindCallback})
	r(POST, v1+"/send-money/mpesa/status/:token", s.b2cStatus, access{kind: kindCallback})
}

func (s *Server) healthz(c echo.Context) error {
	if s.ready != nil && !s.ready() {
		return &edge.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "starting", Detail: "Service is starting."}
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.PingContext(ctx); err != nil {
		return &edge.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "database_unavailable", Detail: "Database is unavailable."}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "environment": s.cfg.Environment})
}

// InterfaceVersion is the version of the interface description this server
// implements (spec, Versioning: the path prefix is /api/v1, the description 1.0.0).
// It changes with the interface, not with paysvc's releases.
const InterfaceVersion = "1.0.0"

// apiVersion states which interface this server speaks: its name, the interface
// version and the path prefix, and the environment (sandbox or live) as /healthz does.
func (s *Server) apiVersion(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"name": "paysvc", "version": InterfaceVersion, "api": "v1",
		"prefix": "/api/v1", "environment": s.cfg.Environment})
}

// requestID takes a sane X-Request-Id from the client or makes one, and echoes it.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get("X-Request-Id")
		if !saneRequestID(id) {
			id = ids.UUID()
		}
		edge.SetRequestID(c, id)
		c.Response().Header().Set("X-Request-Id", id)
		return next(c)
	}
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r)) {
			return false
		}
	}
	return true
}

// connectionClose ends the connection after GET/HEAD/DELETE: the official Node SDK
// writes an unframed body after its GETs, which would otherwise be parsed as the
// start of the next request on the kept-alive connection.
func (s *Server) connectionClose(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodDelete:
			c.Response().Header().Set("Connection", "close")
		}
		return next(c)
	}
}

// initiationBodyBytes is payment-file initiation's body limit with a body limit
// of limit: a payment file of 10,000 transactions is up to about 8 MB in ASCII.
func initiationBodyBytes(limit int64) int64 { return limit * 16 }

// MaxBodyBytes is the largest body any route takes with a body limit of limit:
// payment-file initiation's, or approve's (approvelimit.go), whichever is larger.
func MaxBodyBytes(limit int64) int64 { return max(initiationBodyBytes(limit), approveBodyLimit) }

func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		limit := s.cfg.BodyLimit
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/v1/send-money/initiat"):
			limit = initiationBodyBytes(limit)
		case strings.HasPrefix(r.URL.Path, "/api/v1/send-money/approve"):
			// The SDKs post the whole initiation response back; the slow-body
			// bound (api/deadline) and the text check apply as on every route.
			limit = max(limit, approveBodyLimit)
		}
		if r.ContentLength > limit {
			return edge.ClientError(http.StatusRequestEntityTooLarge, "request_too_large", "Request body is too large.")
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		}
		return next(c)
	}
}

// refuseUnstorable refuses, before any handler runs, URL parts that PostgreSQL
// cannot store (a NUL, invalid UTF-8): a path parameter is a 404, since no resource
// can have such an id, and a query parameter is a 400 naming it. Echo runs e.Use
// middleware after routing, so the parameters are known here, for every route.
func (s *Server) refuseUnstorable(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for _, v := range c.ParamValues() {
			if !edge.StorableText(v) {
				return edge.NotFound("Not found.")
			}
		}
		for name, vs := range c.QueryParams() {
			ok := edge.StorableText(name)
			for _, v := range vs {
				ok = ok && edge.StorableText(v)
			}
			if !ok {
				attr := edge.SafeAttr(name)
				return edge.Invalid(attr, attr+": Must be valid UTF-8 text without NUL characters.")
			}
		}
		return next(c)
	}
}

// recoverPanics turns a handler panic into the generic 500 and logs it: no input
// may crash the process or leave without a JSON body.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("handler panic", "request_id", edge.RequestID(c), "route", c.Path(), "panic", r)
				err = edge.ErrInternal
			}
		}()
		return next(c)
	}
}
