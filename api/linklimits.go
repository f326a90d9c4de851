package api

import (
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// A payment link's id is its only credential (docs/security.md, "Capabilities"):
// whoever has it may open checkout sessions and start STK prompts to any number in
// the merchant's name. Each prompt holds a use of the link's usage_limit for a
// bounded time (storage.LinkHolds), and these budgets bound how many a client and
// all clients together may start, so strangers are not spammed and an abuser who
// keeps starting prompts nobody answers cannot keep a link busy for long.
//
// Budgets are token buckets per API instance, like the other limits (ratelimit.go):
//   - per link and client address (the address as the rate limiter sees it,
//     X-Forwarded-For only from PAYSVC_TRUSTED_PROXIES): keyed by the pair, so
//     payers who share an address (carrier NAT) with an abuser of another link
//     are not refused because of it;
//   - per link, over every address: the bound on prompts one link can send.
//
// A refused request is 429 `throttled` with Retry-After, like every limit.

// Budget is a token bucket: Burst requests at once, then one more every Every.
type Budget struct {
	Burst int
	Every time.Duration
}

// LinkLimits are the payment-link budgets.
type LinkLimits struct {
	SessionsPerAddr, PromptsPerAddr Budget // per link and client address
	SessionsPerLink, PromptsPerLink Budget // per link
}

// defaultLinkLimits: a payer opens a session or two and retries a prompt a few
// times (a wrong PIN, a cancel); a busy link takes a payment every few seconds.
var defaultLinkLimits = LinkLimits{
	SessionsPerAddr: Budget{Burst: 20, Every: 30 * time.Second},
	PromptsPerAddr:  Budget{Burst: 5, Every: 2 * time.Minute},
	SessionsPerLink: Budget{Burst: 300, Every: 200 * time.Millisecond},
	PromptsPerLink:  Budget{Burst: 60, Every: 5 * time.Second},
}

func (l *LinkLimits) defaults() {
	for _, b := range []struct{ got, def *Budget }{
		{&l.SessionsPerAddr, &defaultLinkLimits.SessionsPerAddr}, {&l.PromptsPerAddr, &defaultLinkLimits.PromptsPerAddr},
		{&l.SessionsPerLink, &defaultLinkLimits.SessionsPerLink}, {&l.PromptsPerLink, &defaultLinkLimits.PromptsPerLink},
	} {
		if b.got.Burst <= 0 || b.got.Every <= 0 {
			*b.got = *b.def
		}
	}
}

var linkThrottled = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "paysvc_payment_link_throttled_total",
	Help: "Payment link sessions and payments refused 429 by the link budgets, by what (session, prompt) and scope (address, link).",
}, []string{"what", "scope"})

func init() {
	for _, w := range []string{"session", "prompt"} {
		for _, sc := range []string{"address", "link"} {
			linkThrottled.WithLabelValues(w, sc)
		}
	}
}

type linkLimiters struct {
	sessionsAddr, promptsAddr, sessionsLink, promptsLink *limiter
}

func budgetLimiter(b Budget) *limiter { return newLimiter(1/b.Every.Seconds(), b.Burst) }

// newLinkLimiters: nil limiters (no limit) when RateLimit is 0, like every limit.
func newLinkLimiters(cfg Config) *linkLimiters {
	if cfg.RateLimit <= 0 {
		return &linkLimiters{}
	}
	l := cfg.LinkLimits
	return &linkLimiters{sessionsAddr: budgetLimiter(l.SessionsPerAddr), promptsAddr: budgetLimiter(l.PromptsPerAddr),
		sessionsLink: budgetLimiter(l.SessionsPerLink), promptsLink: budgetLimiter(l.PromptsPerLink)}
}

// spend takes a token of the client's budget on the link, then of the link's: the
// address first, so one client exhausts only its own budget before the link's.
func (s *Server) spendLink(c echo.Context, what, linkID string, perAddr, perLink *limiter) error {
	now := time.Now()
	if ok, wait := perAddr.take(linkID+"|"+s.clientIP(c), now); !ok {
		linkThrottled.WithLabelValues(what, "address").Inc()
		return throttled(wait)
	}
	if ok, wait := perLink.take(linkID, now); !ok {
		linkThrottled.WithLabelValues(what, "link").Inc()
		return throttled(wait)
	}
	return nil
}

// linkSession spends a session of the link's budgets.
func (s *Server) linkSession(c echo.Context, linkID string) error {
	return s.spendLink(c, "session", linkID, s.links.sessionsAddr, s.links.sessionsLink)
}

// linkPrompt spends a payment (an STK prompt, or a card charge) of the link's budgets.
func (s *Server) linkPrompt(c echo.Context, linkID string) error {
	return s.spendLink(c, "prompt", linkID, s.links.promptsAddr, s.links.promptsLink)
}
