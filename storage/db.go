package storage

import (
	"context"
	"errors"
	"fmt"
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
// with its database does not fail on the first refused connection.
func Open(ctx context.Context, rawURL string, wait time.Duration) (*sqlx.DB, error) {
	dsn, err := WithSSLMode(rawURL)
	if err != nil {
		return nil, err
	}
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db.SetMaxOpenConns(40)
	db.SetMaxIdleConns(40)
	db.SetConnMaxIdleTime(5 * time.Minute)
	deadline := time.Now().Add(wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = db.PingContext(pctx)
		cancel()
		if err == nil {
			return db, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			db.Close()
			return nil, fmt.Errorf("connect to database: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
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
