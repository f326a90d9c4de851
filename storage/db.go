package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the Postgres driver registered as "postgres"
)

// ErrNotFound is returned by single-row reads that match nothing for the merchant.
var ErrNotFound = errors.New("not found")

// WithSSLMode returns the URL with an explicit sslmode: lib/pq's default is
// "require", which fails against a local server without TLS, and an implicit mode
// hides which one is in force. Loopback and socket hosts get "disable", anything
// else "require"; a URL that names a mode keeps it.
func WithSSLMode(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("database url must be postgres://...: %w", errInvalidURL)
	}
	q := u.Query()
	if q.Get("sslmode") != "" {
		return raw, nil
	}
	host := u.Hostname()
	mode := "require"
	if host == "" || host == "localhost" || strings.HasPrefix(host, "/") || isLoopback(host) || q.Get("host") != "" && strings.HasPrefix(q.Get("host"), "/") {
		mode = "disable"
	}
	q.Set("sslmode", mode)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

var errInvalidURL = errors.New("invalid database url")

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Open connects and pings, retrying for up to wait so a process started together
// with its database does not fail on the first refused connection. Its pool holds
// up to 40 connections (OpenPool sizes a process's pools).
func Open(ctx context.Context, rawURL string, wait time.Duration) (*sqlx.DB, error) {
	return OpenPool(ctx, rawURL, wait, Pool{MaxConns: 40})
}

// Pool is how OpenPool sizes and announces a connection pool.
type Pool struct {
	// MaxConns bounds the pool's connections (open and idle).
	MaxConns int
	// Log, when set, hears once a second-ish that the server is not answering
	// yet, saying where it is looked for: a missing PostgreSQL is then no silent
	// half minute.
	Log *slog.Logger
}

// OpenPool is Open with the pool's size and a log for the wait.
func OpenPool(ctx context.Context, rawURL string, wait time.Duration, p Pool) (*sqlx.DB, error) {
	dsn, err := WithSSLMode(rawURL)
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db.SetMaxOpenConns(p.MaxConns)
	db.SetMaxIdleConns(p.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	where := Where(rawURL)
	start := time.Now()
	var told time.Time
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = db.PingContext(pctx)
		cancel()
		if err == nil {
			return db, nil
		}
		if time.Since(start) > wait || ctx.Err() != nil {
			db.Close()
			return nil, fmt.Errorf("connect to the database at %s: %w (waited %s; `make pg` starts the private PostgreSQL, "+
				"PAYSVC_DATABASE_URL names another)", where, err, time.Since(start).Round(time.Second))
		}
		if p.Log != nil && time.Since(told) >= 5*time.Second {
			told = time.Now()
			p.Log.Warn("waiting for PostgreSQL", "at", where, "error", err.Error(), "gives_up_in", (wait - time.Since(start)).Round(time.Second).String(),
				"hint", "`make pg` starts the private PostgreSQL; PAYSVC_DATABASE_URL names another")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Where is the host, port and database a URL names, without its user or
// password: what a message may say about where paysvc looks.
func Where(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(an unreadable URL)"
	}
	host := u.Host
	if h := u.Query().Get("host"); host == "" && h != "" {
		host = h
	}
	return host + u.Path
}

// WithParam returns the URL with a run-time parameter set; lib/pq sends unknown URL
// parameters to the server as session settings (e.g. synchronous_commit=off).
func WithParam(raw, key, value string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("database url: %w", errInvalidURL)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
