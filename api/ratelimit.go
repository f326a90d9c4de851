package api

import (
	"math"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// limiter is a token bucket per API key (or per client address before
// authentication is known). It is per instance: N instances allow N times the rate.
type limiter struct {
	rate  float64
	burst float64
	mu    sync.Mutex
	m     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), m: map[string]*bucket{}}
}

// take spends a token; when none is left it returns the seconds until one is.
func (l *limiter) take(key string, now time.Time) (bool, int) {
	if l.rate <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[key]
	if b == nil {
		if len(l.m) > 100_000 {
			clear(l.m) // forgetting buckets only ever grants more, never refuses wrongly
		}
		b = &bucket{tokens: l.burst, last: now}
		l.m[key] = b
	}
	b.tokens = math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, int(math.Ceil((1 - b.tokens) / l.rate))
}

// limitBeforeAuth keys the bucket by the credential presented (hashed by the cache key
// space of the authenticator is not needed: the raw header never leaves memory).
func (s *Server) limitBeforeAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get("Authorization")
		if key == "" {
			key = "ip:" + c.RealIP()
		}
		if ok, wait := s.limiter.take(key, time.Now()); !ok {
			rateLimited.Inc()
			return &Error{Status: 429, Type: "client_error", Code: "throttled",
				Detail: "Request was throttled. Retry after the number of seconds in Retry-After.", RetryAfter: max(wait, 1)}
		}
		return next(c)
	}
}

// limitOpen, limitCallback: routes without a key share the address's bucket.
func (s *Server) limitOpen(next echo.HandlerFunc) echo.HandlerFunc     { return s.limitBeforeAuth(next) }
func (s *Server) limitCallback(next echo.HandlerFunc) echo.HandlerFunc { return next }

// limitPrincipal: the bucket was taken before authentication.
func (s *Server) limitPrincipal(next echo.HandlerFunc) echo.HandlerFunc { return next }
