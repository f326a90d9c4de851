package api

import (
	"crypto/subtle"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
)

// maxBuckets bounds each limiter's table: about 100 bytes a bucket, so a flood of
// random addresses costs at most ~10 MB per limiter.
const maxBuckets = 100_000

const ctxClientIP = "paysvc.client_ip"

// limiter is a token bucket per key, per instance: N instances allow N times the rate.
type limiter struct {
	rate  float64
	burst float64
	max   int
	mu    sync.Mutex
	m     map[string]*bucket
	// overflow is shared by new keys while the table is full of active buckets:
	// under a flood of more distinct sources than the table holds, the newcomers are
	// limited together, and every source already known keeps its own bucket (nobody
	// gets a fresh bucket by crowding the table).
	overflow bucket
	swept    time.Time
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(max(burst, 1)), max: maxBuckets, m: map[string]*bucket{}}
}

// refilled is b's token count at now.
func (l *limiter) refilled(b *bucket, now time.Time) float64 {
	if b.last.IsZero() {
		return l.burst
	}
	return math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
}

// bucketOf finds or makes key's bucket. A full bucket is the same as no bucket, so
// when the table is at its bound the full ones are dropped (at most once a second:
// a sweep walks the whole table).
func (l *limiter) bucketOf(key string, now time.Time) *bucket {
	if b := l.m[key]; b != nil {
		return b
	}
	if len(l.m) >= l.max && now.Sub(l.swept) >= time.Second {
		l.swept = now
		for k, b := range l.m {
			if l.refilled(b, now) >= l.burst {
				delete(l.m, k)
			}
		}
	}
	if len(l.m) >= l.max {
		return &l.overflow
	}
	b := &bucket{tokens: l.burst, last: now}
	l.m[key] = b
	return b
}

// take spends a token; when none is left it returns the seconds until one is.
func (l *limiter) take(key string, now time.Time) (bool, int) {
	if l == nil || l.rate <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucketOf(key, now)
	b.tokens, b.last = l.refilled(b, now), now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, max(int(math.Ceil((1-b.tokens)/l.rate)), 1)
}

// has reports whether key could spend a token now, without spending it.
func (l *limiter) has(key string, now time.Time) (bool, int) {
	if l == nil || l.rate <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[key]
	if b == nil {
		return true, 0
	}
	if t := l.refilled(b, now); t < 1 {
		return false, max(int(math.Ceil((1-t)/l.rate)), 1)
	}
	return true, 0
}

func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// limits are the API's three budgets. Keys: one bucket per authenticated key (secret
// or public), by key id, never by what a caller writes in a header. Addresses: one
// bucket per client address for everything without a secret key (open routes,
// public-key and signature calls, failed authentications). Callbacks: one bucket for
// the payment providers' callbacks with a valid path token, apart from the others,
// so a flood of anything else cannot starve them.
type limits struct {
	keys, addrs, callbacks *limiter
	trusted                []netip.Prefix
}

func newLimits(cfg Config) *limits {
	l := &limits{trusted: cfg.TrustedProxies}
	if cfg.RateLimit <= 0 { // 0 disables every limit
		return l
	}
	l.keys = newLimiter(cfg.RateLimit, cfg.RateBurst)
	l.addrs = newLimiter(cfg.AddrRateLimit, cfg.AddrRateBurst)
	l.callbacks = newLimiter(cfg.CallbackRateLimit, cfg.CallbackRateBurst)
	return l
}

func throttled(wait int) *edge.Error {
	rateLimited.Inc()
	return &edge.Error{Status: http.StatusTooManyRequests, Type: "client_error", Code: "throttled",
		Detail: "Request was throttled. Retry after the number of seconds in Retry-After.", RetryAfter: max(wait, 1)}
}

// clientIP is the address a request comes from, as a bucket key. X-Forwarded-For is
// believed only when the socket peer is a configured trusted proxy, and then read
// from the right (the entries the proxies appended) to the first address that is not
// itself a trusted proxy: entries further left are whatever the client wrote. IPv6
// clients are keyed by their /64, which one subscriber usually holds whole.
func (s *Server) clientIP(c echo.Context) string {
	r := c.Request()
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return "peer:" + host
	}
	client := peer.Unmap()
	if s.limits.isTrusted(client) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a mangled hop: trust nothing to its left
			}
			client = a.Unmap()
			if !s.limits.isTrusted(client) {
				break
			}
		}
	}
	if client.Is6() {
		p, _ := client.Prefix(64)
		return p.String()
	}
	return client.String()
}

func (l *limits) isTrusted(a netip.Addr) bool {
	for _, p := range l.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// limitOpen limits routes without a credential by client address.
func (s *Server) limitOpen(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if ok, wait := s.limits.addrs.take(s.clientIP(c), time.Now()); !ok {
			return throttled(wait)
		}
		return next(c)
	}
}

// limitCallback gives provider callbacks with the right path token their own
// budget; a wrong token is an unauthenticated call, limited by address, and 404.
func (s *Server) limitCallback(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		tok := s.cfg.DarajaCallbackToken
		if tok == "" || subtle.ConstantTimeCompare([]byte(c.Param("token")), []byte(tok)) != 1 {
			if ok, wait := s.limits.addrs.take(s.clientIP(c), time.Now()); !ok {
				return throttled(wait)
			}
			return edge.NotFound("Not found.")
		}
		if ok, wait := s.limits.callbacks.take("daraja", time.Now()); !ok {
			return throttled(wait)
		}
		return next(c)
	}
}

// limitBeforeAuth wraps authentication. An address whose bucket is empty is refused
// before any key lookup, unless it presents a secret key already known valid (so a
// flood of invented keys neither reaches the database nor locks out the merchant's
// server behind the same address); a failed authentication spends the address's
// token, so varying the Authorization header buys nothing.
func (s *Server) limitBeforeAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ip := s.clientIP(c)
		c.Set(ctxClientIP, ip)
		if ok, wait := s.limits.addrs.has(ip, time.Now()); !ok && !s.auth.knownSecret(c.Request()) {
			return throttled(wait)
		}
		err := next(c)
		if edge.PrincipalOf(c) == nil {
			s.limits.addrs.take(ip, time.Now())
		}
		return err
	}
}

// limitPrincipal spends the authenticated caller's tokens: a secret key's own bucket;
// for a public key, the address's bucket first and then the key's (a public key is
// published, so one abuser must exhaust only their own address, not the merchant's
// checkout for everyone); for a signature, the address's.
func (s *Server) limitPrincipal(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := edge.PrincipalOf(c)
		if p == nil {
			return next(c)
		}
		ip, _ := c.Get(ctxClientIP).(string)
		now := time.Now()
		var ok bool
		var wait int
		switch p.Kind {
		case "secret":
			ok, wait = s.limits.keys.take("secret:"+p.KeyID, now)
		case "public":
			if ok, wait = s.limits.addrs.take(ip, now); ok {
				ok, wait = s.limits.keys.take("public:"+p.KeyID, now)
			}
		default:
			ok, wait = s.limits.addrs.take(ip, now)
		}
		if !ok {
			return throttled(wait)
		}
		return next(c)
	}
}
