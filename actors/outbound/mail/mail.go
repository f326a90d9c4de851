package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Message is one email. From may be empty when the sender's Config has a
// default From. To is one address or a comma-separated list; each may carry a
// display name ("Ann <ann@example.com>"). Text and HTML are UTF-8; with both
// the message is multipart/alternative, with one it is a single part.
// Headers holds extra header fields such as Message-ID or
// X-Paysvc-Request-Id; Date and Message-ID given here replace the generated
// ones, and From, To, Cc, Bcc, Subject, MIME-Version and Content-* are
// refused (use the fields). Non-ASCII header values are RFC 2047 encoded.
type Message struct {
	From, To, Subject, Text, HTML string
	Headers                       map[string]string
}

// Sender delivers a Message. A nil error means the server accepted the message
// for delivery (not that it reached the mailbox).
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// SMTPError is a reply from the SMTP server that ended the send.
type SMTPError struct {
	Code    int    // reply code, e.g. 550
	Message string // reply text, e.g. "5.1.1 no such user" (one line, sanitised)
	Stage   string // CONNECT, EHLO, STARTTLS, AUTH, MAIL, RCPT or DATA
}

// Permanent reports whether the server refused for good (a 5xx reply):
// sending the same message again will fail the same way.
func (e *SMTPError) Permanent() bool { return e.Code >= 500 && e.Code <= 599 }

// Error describes the refusal in words that are safe to store and show, e.g.
// "recipient refused: 550 5.1.1 no such user".
func (e *SMTPError) Error() string {
	what := "server refused"
	switch e.Stage {
	case "CONNECT":
		what = "server refused connection"
	case "EHLO":
		what = "greeting refused"
	case "STARTTLS":
		what = "STARTTLS refused"
	case "AUTH":
		what = "authentication failed"
	case "MAIL":
		what = "sender refused"
	case "RCPT":
		what = "recipient refused"
	case "DATA":
		what = "message refused"
	}
	s := what + ": " + strconv.Itoa(e.Code)
	if e.Message != "" {
		s += " " + e.Message
	}
	return s
}

// Errors that are neither a server reply nor a network failure. They are not
// permanent for a given message: they persist until the server or the
// configuration changes.
var (
	// ErrTLSRequired: starttls=required and the server does not offer
	// STARTTLS.
	ErrTLSRequired = errors.New("mail: server does not offer STARTTLS and the configuration requires it")
	// ErrInsecureAuth: credentials are configured but the connection is not
	// encrypted and the server is not on a loopback address.
	ErrInsecureAuth = errors.New("mail: refusing to send credentials over an unencrypted connection")
	// ErrAuthUnsupported: credentials are configured but the server does not
	// offer AUTH PLAIN.
	ErrAuthUnsupported = errors.New("mail: server does not offer AUTH PLAIN")
)

// IsPermanent reports whether err means the message can never be sent as it
// is: a 5xx reply (*SMTPError) or an invalid message (ErrInvalidMessage).
// Everything else (4xx replies, network errors, timeouts, TLS and
// configuration problems) is worth retrying later.
func IsPermanent(err error) bool {
	var se *SMTPError
	if errors.As(err, &se) {
		return se.Permanent()
	}
	return errors.Is(err, ErrInvalidMessage)
}

// DefaultTimeout bounds a send whose context has no deadline.
const DefaultTimeout = 60 * time.Second

// SMTPSender sends each Message over a new SMTP connection: EHLO, STARTTLS
// (per Config.StartTLS; smtps uses implicit TLS instead), AUTH PLAIN when
// credentials are configured, MAIL FROM, RCPT TO, DATA, QUIT. It is safe for
// concurrent use.
type SMTPSender struct {
	cfg Config
}

var _ Sender = (*SMTPSender)(nil)

// NewSMTPSender returns a sender for cfg; a zero Port, StartTLS or HeloName
// gets the same default as in ParseURL. Configuration errors are reported by
// Send (wrapping ErrInvalidConfig).
func NewSMTPSender(cfg Config) *SMTPSender {
	return &SMTPSender{cfg: cfg.withDefaults()}
}

// Config returns the sender's configuration (defaults applied).
func (s *SMTPSender) Config() Config { return s.cfg }

// Send delivers m. The context bounds the whole conversation, dial included
// (DefaultTimeout when it has no deadline). Errors: *SMTPError for a server
// reply, wrapping ErrInvalidMessage for a bad message, wrapping ctx.Err() when
// the context ended the send, other errors for network, TLS and configuration
// problems. None of them contains the password.
func (s *SMTPSender) Send(ctx context.Context, m Message) error {
	if err := s.cfg.validate(); err != nil {
		return err
	}
	if m.From == "" {
		m.From = s.cfg.From
	}
	env, err := buildMessage(m, time.Now())
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mail: send: %w", err)
	}
	return s.deliver(ctx, env)
}

// longAgo is a deadline in the past: setting it unblocks pending I/O.
var longAgo = time.Unix(1, 0)

func (s *SMTPSender) deliver(ctx context.Context, env *envelope) (err error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultTimeout)
	}
	dialer := net.Dialer{Deadline: deadline}
	addr := net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.cfg.Port))
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return netError(ctx, "connect", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return netError(ctx, "connect", err)
	}
	// Cancellation interrupts whatever read or write is pending.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(longAgo) })
	defer stop()

	loopback := false
	if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		loopback = ta.IP.IsLoopback()
	}
	tlsCfg := &tls.Config{
		ServerName:         s.cfg.Host,
		InsecureSkipVerify: s.cfg.InsecureSkipVerify, //nolint:gosec // tests only, documented
		MinVersion:         tls.VersionTLS12,
	}

	var c net.Conn = conn
	secure := false
	if s.cfg.ImplicitTLS {
		tc := tls.Client(conn, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return netError(ctx, "TLS handshake", err)
		}
		c, secure = tc, true
	}

	client, err := smtp.NewClient(c, s.cfg.Host)
	if err != nil {
		return replyError(ctx, "CONNECT", err)
	}
	defer client.Close()
	// On a refusal, say goodbye politely but briefly.
	quit := func() {
		if ctx.Err() != nil {
			return
		}
		_ = conn.SetDeadline(earliest(deadline, time.Now().Add(2*time.Second)))
		_ = client.Quit()
	}
	fail := func(stage string, err error) error {
		err = replyError(ctx, stage, err)
		var se *SMTPError
		if errors.As(err, &se) {
			quit()
		}
		return err
	}

	if err := client.Hello(s.cfg.HeloName); err != nil {
		return fail("EHLO", err)
	}

	if !secure && s.cfg.StartTLS != StartTLSOff {
		if offered, _ := client.Extension("STARTTLS"); offered {
			if err := client.StartTLS(tlsCfg); err != nil {
				return fail("STARTTLS", err)
			}
			secure = true
		} else if s.cfg.StartTLS == StartTLSRequired {
			quit()
			return ErrTLSRequired
		}
	}

	if s.cfg.Username != "" {
		if !secure && !loopback {
			quit()
			return ErrInsecureAuth
		}
		ok, mechs := client.Extension("AUTH")
		if !ok || !hasWord(mechs, "PLAIN") {
			quit()
			return ErrAuthUnsupported
		}
		if err := client.Auth(plainAuth{user: s.cfg.Username, pass: s.cfg.Password}); err != nil {
			return fail("AUTH", err)
		}
	}

	if err := client.Mail(env.from); err != nil {
		return fail("MAIL", err)
	}
	for _, rcpt := range env.rcpts {
		if err := client.Rcpt(rcpt); err != nil {
			return fail("RCPT", err)
		}
	}
	w, err := client.Data()
	if err != nil {
		return fail("DATA", err)
	}
	// net/smtp's data writer dot-stuffs and terminates with CRLF.CRLF.
	if _, err := w.Write(env.data); err != nil {
		return fail("DATA", err)
	}
	if err := w.Close(); err != nil {
		return fail("DATA", err)
	}
	// The server has taken the message; a failed QUIT changes nothing.
	_ = client.Quit()
	return nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// replyError turns a server reply into *SMTPError and anything else into a
// network error.
func replyError(ctx context.Context, stage string, err error) error {
	var tp *textproto.Error
	if errors.As(err, &tp) {
		return &SMTPError{Code: tp.Code, Message: cleanReply(tp.Msg), Stage: stage}
	}
	return netError(ctx, stage, err)
}

// netError wraps err, and ctx's error when the context is what ended the
// send (so errors.Is(err, context.DeadlineExceeded) works).
func netError(ctx context.Context, stage string, err error) error {
	cerr := ctx.Err()
	if cerr == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("mail: %s: %w (%w)", stage, cerr, err)
	}
	return fmt.Errorf("mail: %s: %w", stage, err)
}

// cleanReply makes server text safe to store: one line, printable, bounded.
func cleanReply(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\uFFFD' {
			return -1
		}
		return r
	}, s)
	if len(s) > 300 {
		s = s[:300]
		for !utf8.ValidString(s) { // don't leave half a rune
			s = s[:len(s)-1]
		}
		s += "..."
	}
	return s
}

func hasWord(list, word string) bool {
	for _, w := range strings.Fields(list) {
		if strings.EqualFold(w, word) {
			return true
		}
	}
	return false
}

// plainAuth is AUTH PLAIN (RFC 4616). Unlike smtp.PlainAuth it leaves the
// "encrypted or loopback" decision to deliver, which checks the connected
// address rather than the configured name.
type plainAuth struct{ user, pass string }

func (a plainAuth) Start(*smtp.ServerInfo) (string, []byte, error) {
	return "PLAIN", []byte("\x00" + a.user + "\x00" + a.pass), nil
}

func (a plainAuth) Next(_ []byte, more bool) ([]byte, error) {
	if more {
		return nil, errors.New("mail: unexpected AUTH PLAIN challenge")
	}
	return nil, nil
}
