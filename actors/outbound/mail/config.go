package mail

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	netmail "net/mail"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// StartTLSPolicy says what an smtp:// sender does about STARTTLS.
type StartTLSPolicy string

const (
	// StartTLSOptional upgrades when the server offers STARTTLS and carries on
	// in clear text otherwise (credentials are still never sent in clear text
	// to a non-loopback server). It is the default.
	StartTLSOptional StartTLSPolicy = "optional"
	// StartTLSRequired fails the send with ErrTLSRequired when the server does
	// not offer STARTTLS.
	StartTLSRequired StartTLSPolicy = "required"
	// StartTLSOff never upgrades.
	StartTLSOff StartTLSPolicy = "off"
)

// Default ports.
const (
	PortSMTP       = 25  // smtp:// without credentials (relay)
	PortSubmission = 587 // smtp:// with credentials (message submission, RFC 6409)
	PortSMTPS      = 465 // smtps:// (implicit TLS, RFC 8314)
)

// ErrInvalidConfig is wrapped by every configuration error (from ParseURL and
// from Send with a Config that was built by hand).
var ErrInvalidConfig = errors.New("mail: invalid SMTP configuration")

// redacted replaces the password wherever a Config is printed.
const redacted = "xxxxx"

// Config is where and how an SMTPSender delivers. It is usually built by
// ParseURL from PAYSVC_SMTP_URL.
type Config struct {
	Host     string
	Port     int // 0: default for the scheme and credentials (see ParseURL)
	Username string
	Password string // never printed: see String
	// From is the default sender ("billing@example.com" or
	// "Billing <billing@example.com>"), used when Message.From is empty.
	From string
	// ImplicitTLS is true for smtps://: TLS from the first byte.
	ImplicitTLS bool
	// StartTLS applies to smtp:// only; "" means StartTLSOptional.
	StartTLS StartTLSPolicy
	// InsecureSkipVerify disables certificate verification. Tests only.
	InsecureSkipVerify bool
	// HeloName is the name sent with EHLO; "" means the host name of this
	// machine (or "localhost" when that is not a usable name).
	HeloName string
}

// ParseURL parses an SMTP URL such as
//
//	smtp://user:pass@mail.example.com:587?from=billing@example.com&starttls=required
//	smtps://user:pass@mail.example.com?from=Billing%20%3Cbilling@example.com%3E
//
// Schemes: smtp (plain TCP, STARTTLS per the starttls parameter) and smtps
// (implicit TLS). The port defaults to 465 for smtps, and for smtp to 587 when
// credentials are given (message submission) and 25 otherwise. User name and
// password must be percent-encoded when they contain any of @ : / ? # % or
// spaces.
//
// Query parameters:
//
//	from                  default sender address (may include a display name)
//	starttls              required | optional (default) | off; smtp only
//	insecure_skip_verify  true | false; skips certificate checks, tests only
//	helo                  name to announce in EHLO
//
// Unknown or repeated parameters are errors. Errors never contain the
// password (nor, for a URL that does not parse, any part of it).
func ParseURL(raw string) (Config, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Config{}, fmt.Errorf("%w: empty URL", ErrInvalidConfig)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// The url package quotes fragments of the input in its errors, and a
		// fragment of a mis-encoded password is still a secret: describe the
		// problem without quoting anything.
		return Config{}, fmt.Errorf("%w: malformed URL (%s); percent-encode special characters in the user name and password", ErrInvalidConfig, describeURLError(err))
	}
	var cfg Config
	switch strings.ToLower(u.Scheme) {
	case "smtp":
	case "smtps":
		cfg.ImplicitTLS = true
	case "":
		return Config{}, fmt.Errorf("%w: missing scheme (want smtp:// or smtps://)", ErrInvalidConfig)
	default:
		if !isToken(u.Scheme) {
			return Config{}, fmt.Errorf("%w: unsupported scheme (want smtp or smtps)", ErrInvalidConfig)
		}
		return Config{}, fmt.Errorf("%w: unsupported scheme %q (want smtp or smtps)", ErrInvalidConfig, u.Scheme)
	}
	if u.Opaque != "" {
		return Config{}, fmt.Errorf("%w: want %s://host[:port]", ErrInvalidConfig, strings.ToLower(u.Scheme))
	}
	// A password with an unencoded / or # ends up in the path or the
	// fragment: reject those without quoting them.
	if u.Path != "" && u.Path != "/" {
		return Config{}, fmt.Errorf("%w: unexpected path (percent-encode / in the user name and password)", ErrInvalidConfig)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return Config{}, fmt.Errorf("%w: unexpected fragment (percent-encode # in the user name and password)", ErrInvalidConfig)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	cfg.Host = u.Hostname()
	if cfg.Host == "" {
		return Config{}, fmt.Errorf("%w: missing host", ErrInvalidConfig)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Config{}, fmt.Errorf("%w: invalid port (want 1-65535)", ErrInvalidConfig)
		}
		cfg.Port = n
	}

	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("%w: malformed query (%s)", ErrInvalidConfig, describeURLError(err))
	}
	for key, vals := range q {
		if len(vals) != 1 {
			return Config{}, fmt.Errorf("%w: parameter %s given %d times", ErrInvalidConfig, safeKey(key, vals), len(vals))
		}
		v := vals[0]
		switch key {
		case "from":
			if _, err := netmail.ParseAddress(v); err != nil {
				return Config{}, fmt.Errorf("%w: invalid from address %s (want name@example.com or Name <name@example.com>)", ErrInvalidConfig, safeQuote(v))
			}
			cfg.From = v
		case "starttls":
			switch p := StartTLSPolicy(strings.ToLower(v)); p {
			case StartTLSRequired, StartTLSOptional, StartTLSOff:
				cfg.StartTLS = p
			default:
				return Config{}, fmt.Errorf("%w: starttls=%s (want required, optional or off)", ErrInvalidConfig, safeQuote(v))
			}
		case "insecure_skip_verify":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Config{}, fmt.Errorf("%w: insecure_skip_verify=%s (want true or false)", ErrInvalidConfig, safeQuote(v))
			}
			cfg.InsecureSkipVerify = b
		case "helo":
			if !validHelo(v) {
				return Config{}, fmt.Errorf("%w: helo=%s is not a host name", ErrInvalidConfig, safeQuote(v))
			}
			cfg.HeloName = v
		default:
			return Config{}, fmt.Errorf("%w: unknown parameter %s (known: from, starttls, insecure_skip_verify, helo)", ErrInvalidConfig, safeKey(key, vals))
		}
	}
	if cfg.ImplicitTLS && cfg.StartTLS != "" && cfg.StartTLS != StartTLSOptional {
		return Config{}, fmt.Errorf("%w: starttls does not apply to smtps:// (TLS is implicit)", ErrInvalidConfig)
	}
	return cfg.withDefaults(), nil
}

// withDefaults fills Port, StartTLS and HeloName.
func (c Config) withDefaults() Config {
	if c.Port == 0 {
		switch {
		case c.ImplicitTLS:
			c.Port = PortSMTPS
		case c.Username != "":
			c.Port = PortSubmission
		default:
			c.Port = PortSMTP
		}
	}
	if c.StartTLS == "" {
		c.StartTLS = StartTLSOptional
	}
	if c.HeloName == "" {
		c.HeloName = "localhost"
		if h, err := os.Hostname(); err == nil && validHelo(h) {
			c.HeloName = h
		}
	}
	return c
}

// validate checks a Config that may have been built by hand.
func (c Config) validate() error {
	if c.Host == "" {
		return fmt.Errorf("%w: missing host", ErrInvalidConfig)
	}
	if strings.ContainsAny(c.Host, " \t\r\n/@") {
		return fmt.Errorf("%w: invalid host", ErrInvalidConfig)
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("%w: invalid port %d", ErrInvalidConfig, c.Port)
	}
	switch c.StartTLS {
	case StartTLSRequired, StartTLSOptional, StartTLSOff:
	default:
		return fmt.Errorf("%w: invalid starttls policy %q", ErrInvalidConfig, c.StartTLS)
	}
	if !validHelo(c.HeloName) {
		return fmt.Errorf("%w: invalid helo name", ErrInvalidConfig)
	}
	if c.Username == "" && c.Password != "" {
		return fmt.Errorf("%w: password without user name", ErrInvalidConfig)
	}
	return nil
}

// String prints the Config as an SMTP URL with the password replaced by
// "xxxxx", so it is safe to log.
func (c Config) String() string {
	scheme := "smtp"
	if c.ImplicitTLS {
		scheme = "smtps"
	}
	u := url.URL{Scheme: scheme, Host: c.Host}
	if c.Port != 0 {
		u.Host = net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	} else if strings.Contains(c.Host, ":") {
		u.Host = "[" + c.Host + "]"
	}
	switch {
	case c.Password != "":
		u.User = url.UserPassword(c.Username, redacted)
	case c.Username != "":
		u.User = url.User(c.Username)
	}
	q := url.Values{}
	if c.From != "" {
		q.Set("from", c.From)
	}
	if !c.ImplicitTLS && c.StartTLS != "" {
		q.Set("starttls", string(c.StartTLS))
	}
	if c.InsecureSkipVerify {
		q.Set("insecure_skip_verify", "true")
	}
	if c.HeloName != "" {
		q.Set("helo", c.HeloName)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// GoString keeps %#v from printing the password.
func (c Config) GoString() string { return "mail.Config(" + strconv.Quote(c.String()) + ")" }

// LogValue keeps log/slog (text and JSON handlers) from printing the password.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// describeURLError names the kind of a url parse error without quoting the
// input.
func describeURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var esc url.EscapeError
	var host url.InvalidHostError
	msg := err.Error()
	switch {
	case errors.As(err, &esc), strings.Contains(msg, "escape"):
		return "bad percent-encoding"
	case errors.As(err, &host):
		return "invalid character in host"
	case strings.Contains(msg, "invalid port"):
		return "invalid port"
	case strings.Contains(msg, "userinfo"):
		return "invalid character in user name or password"
	case strings.Contains(msg, "control character"):
		return "control character"
	case strings.Contains(msg, "missing protocol scheme"):
		return "missing scheme"
	default:
		return "unparsable"
	}
}

// safeKey quotes an unknown query key unless the query looks like it swallowed
// part of the user info (an unencoded ? in a password moves the rest of the
// password and the @host into the query), in which case it quotes nothing.
func safeKey(key string, vals []string) string {
	if strings.Contains(key, "@") || !isToken(key) {
		return "(name withheld)"
	}
	for _, v := range vals {
		if strings.Contains(v, "@") {
			return "(name withheld)"
		}
	}
	return strconv.Quote(key)
}

// safeQuote quotes a query value unless it contains an @: a value with an @
// may be the tail of a password whose ? was not percent-encoded.
func safeQuote(v string) string {
	if strings.Contains(v, "@") || len(v) > 64 {
		return "(value withheld)"
	}
	return strconv.Quote(v)
}

func isToken(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' || r == '+') {
			return false
		}
	}
	return true
}

// validHelo accepts a host name or an address literal ("[192.0.2.1]").
func validHelo(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		ip := strings.TrimPrefix(s[1:len(s)-1], "IPv6:")
		return net.ParseIP(ip) != nil
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}
