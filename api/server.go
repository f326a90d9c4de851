package api

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/ids"
	"paysvc/actors/mail"
	"paysvc/actors/replies"
	"paysvc/actors/tariff"
	"paysvc/actors/webhooks/outbound"
)

// Context keys.
const (
	ctxPrincipal = "paysvc.principal"
	ctxRawBody   = "paysvc.raw_body"
	ctxCommandID = "paysvc.command_id"
	ctxSignature = "paysvc.signature"
)

// Config is the API's part of the service configuration.
type Config struct {
	Environment    string        // sandbox or live
	BodyLimit      int64         // bytes
	RateLimit      float64       // requests per second per key; 0 disables
	RateBurst      int           // bucket size per key
	ReplyTimeout   time.Duration // how long a write waits for the engine
	MaxInFlight    int           // commands waiting for replies, per instance
	IdempotencyTTL time.Duration // how long Idempotency-Key records are kept
	KeyCacheTTL    time.Duration // how long a key lookup is reused (bounds revocation delay)
	Fees           *tariff.Schedule
	Rates          *tariff.Rates // converts collections in other currencies to KES
	// ReminderDay is how long a "day" of autosend_reminder is (24h; shorter only to
	// exercise reminders in tests and sandbox demos).
	ReminderDay time.Duration
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
}

// Server is the HTTP API.
type Server struct {
	cfg      Config
	db       *sqlx.DB
	idemDB   *sqlx.DB
	kafka    *kgo.Client
	hub      *replies.Hub
	log      *slog.Logger
	auth     *authenticator
	limiter  *limiter
	inflight chan struct{}
	echo     *echo.Echo
	ready    func() bool
	sig      *signer
	mailer   mail.Sender
	sink     *mail.Sink
	// validateEndpoint checks a webhook endpoint at configuration time.
	validateEndpoint func(string) error
	webhookClient    *outbound.Client // replays
	listen           *listenHub       // sandbox listen streams (listen.go)
}

// New builds the API.
func New(cfg Config, d Deps) *Server {
	cfg.defaults()
	if d.IdempotencyDB == nil {
		d.IdempotencyDB = d.DB
	}
	s := &Server{
		cfg: cfg, db: d.DB, idemDB: d.IdempotencyDB, kafka: d.Kafka, hub: d.Hub, log: d.Log.With("component", "api"),
		auth:     newAuthenticator(d.DB, cfg.Environment, cfg.KeyCacheTTL),
		limiter:  newLimiter(cfg.RateLimit, cfg.RateBurst),
		inflight: make(chan struct{}, cfg.MaxInFlight),
		ready:    d.Ready,
		sig:      &signer{db: d.DB},
		mailer:   d.Mailer,
		sink:     d.Sink,
		listen:   newListenHub(d.Brokers),
	}
	s.webhookClient = outbound.New(outbound.Options{AllowPrivate: cfg.WebhookAllowPrivate && cfg.Environment == "sandbox",
		RootCAs: cfg.WebhookRootCAs})
	s.validateEndpoint = s.webhookClient.ValidateEndpoint
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	// Paths are served with and without their trailing slash, never redirected:
	// SDKs turn a redirected POST into a GET, and one of them follows no redirects.
	e.Pre(middleware.RemoveTrailingSlash())
	e.Use(s.requestID, s.observe, s.recoverPanics, s.connectionClose, s.limitBody)
	s.routes(e)
	s.echo = e
	return s
}

// Handler is the http.Handler of the API.
func (s *Server) Handler() http.Handler { return s.echo }

func (s *Server) routes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	v1 := e.Group("/api/v1")
	v1.Use(s.rateLimit)
	w := v1.Group("/wallets", s.authSecret)
	w.GET("", s.listWallets)
	w.POST("", s.createWallet, s.idempotent)
	w.GET("/:wallet_id", s.getWallet)
	w.GET("/:wallet_id/transactions", s.walletTransactions)
	w.POST("/:wallet_id/intra_transfer", s.intraTransfer, s.idempotent)
	v1.POST("/sandbox/wallets/:wallet_id/deposit", s.sandboxDeposit, s.authSandboxSecret, s.idempotent)
	v1.POST("/payment/mpesa-stk-push", s.stkPush, s.authPublicOrSecret, s.idempotent)
	v1.POST("/payment/status", s.paymentStatus, s.authStatus)
	v1.POST("/payment/collection", s.collection, s.authCollection, s.idempotent)
	v1.POST("/payment/card", s.cardPayment, s.authCollection, s.idempotent)
	v1.POST("/payment/collection/checkout", s.createCheckout, s.authPublicOnly, s.idempotent)
	v1.POST("/checkout", s.createCheckout, s.authPublicOnly, s.idempotent)
	e.GET("/checkout/:checkout_id", s.checkoutPage)
	v1.POST("/payment/collection/pay-requests", s.createPayRequest, s.authSecret, s.idempotent)
	v1.GET("/payment/collection/pay-requests/:request_id", s.getPayRequest, s.authSecret)
	v1.GET("/sandbox/mail", s.sandboxMail, s.authSandboxSecret)
	wh := v1.Group("/webhooks", s.authSecret)
	wh.GET("", s.listWebhooks)
	wh.GET("/events", s.listWebhookEvents)
	wh.POST("/events/:event_id/replay", s.replayWebhookEvent)
	wh.POST("", s.createWebhook, s.idempotent)
	wh.GET("/:webhook_id", s.getWebhook)
	wh.PATCH("/:webhook_id", s.updateWebhook)
	wh.DELETE("/:webhook_id", s.deleteWebhook)
	wh.POST("/:webhook_id/rotate-secret", s.rotateWebhookSecret)
	s.registerListen(v1)
	sm := v1.Group("/send-money")
	sm.POST("/initiation", s.initiatePayoutFile(http.StatusCreated), s.authSecret, s.idempotent)
	sm.POST("/initiate", s.initiatePayoutFile(http.StatusOK), s.authSecret, s.idempotent)
	sm.POST("/approve", s.approvePayoutFile, s.authSecret, s.idempotent)
	sm.POST("/cancel", s.cancelPayoutFile, s.authSecret, s.idempotent)
	sm.POST("/status", s.payoutStatus, s.authSecret)
	sm.POST("/validate-account", s.validateAccount, s.authSecret)
	sm.GET("/bank-codes/ke", s.bankCodes)
	sm.GET("/beneficiaries/frequently_used", s.beneficiaries, s.authSecret)
	e.POST("/api/v1/payment/mpesa/callback/:token", s.mpesaCallback)
	// Each prompt's own callback URL names its invoice (mpesa.Daraja.Push).
	e.POST("/api/v1/payment/mpesa/callback/:token/:invoice", s.mpesaCallback)

	s.routeB2CResults(e) // POST /api/v1/send-money/mpesa/{result,timeout}/:token
	e.RouteNotFound("/*", func(c echo.Context) error { return notFound("Not found.") })
}

func (s *Server) healthz(c echo.Context) error {
	if s.ready != nil && !s.ready() {
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "starting", Detail: "Service is starting."}
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.PingContext(ctx); err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "database_unavailable", Detail: "Database is unavailable."}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok", "environment": s.cfg.Environment})
}

// requestID takes a sane X-Request-Id from the client or makes one, and echoes it.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get("X-Request-Id")
		if !saneRequestID(id) {
			id = ids.UUID()
		}
		c.Set("request_id", id)
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

func requestID(c echo.Context) string {
	id, _ := c.Get("request_id").(string)
	return id
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

func (s *Server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		limit := s.cfg.BodyLimit
		if strings.HasPrefix(r.URL.Path, "/api/v1/send-money/initiat") {
			limit *= 16 // a payment file of 10,000 transactions is about 1.5 MB
		}
		if r.ContentLength > limit {
			return clientError(http.StatusRequestEntityTooLarge, "request_too_large", "Request body is too large.")
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
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
				s.log.Error("handler panic", "request_id", requestID(c), "route", c.Path(), "panic", r)
				err = errInternal
			}
		}()
		return next(c)
	}
}
