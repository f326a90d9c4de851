package mail

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"math/big"
	"net"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// selfSigned makes a certificate for localhost / 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsServer is a test-only SMTP server with STARTTLS (or implicit TLS) and
// AUTH PLAIN, offered only once the connection is encrypted.
type tlsServer struct {
	t        *testing.T
	ln       net.Listener
	cfg      *tls.Config
	implicit bool
	password string // accepted password; anything else gets 535

	mu       sync.Mutex
	authUser string
	authPass string
	authID   string
	authTLS  bool // the AUTH command arrived over TLS
	data     string
	rcpts    []string
	wg       sync.WaitGroup
}

func newTLSServer(t *testing.T, implicit bool, password string) *tlsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{t: t, ln: ln, implicit: implicit, password: password,
		cfg: &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MinVersion: tls.VersionTLS12}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *tlsServer) serve(c net.Conn) {
	secure := false
	if s.implicit {
		tc := tls.Server(c, s.cfg)
		if tc.Handshake() != nil {
			return
		}
		c, secure = tc, true
	}
	tp := textproto.NewConn(c)
	reply := func(lines ...string) bool {
		for _, l := range lines {
			if tp.PrintfLine("%s", l) != nil {
				return false
			}
		}
		return true
	}
	if !reply("220 tls-test ready") {
		return
	}
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		ok := true
		switch strings.ToUpper(verb) {
		case "EHLO":
			if secure {
				ok = reply("250-tls-test", "250-AUTH LOGIN PLAIN", "250 8BITMIME")
			} else {
				ok = reply("250-tls-test", "250 STARTTLS")
			}
		case "STARTTLS":
			if secure {
				ok = reply("503 already secure")
				break
			}
			if !reply("220 go ahead") {
				return
			}
			tc := tls.Server(c, s.cfg)
			if tc.Handshake() != nil {
				return
			}
			c, secure = tc, true
			tp = textproto.NewConn(c)
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			if !strings.EqualFold(mech, "PLAIN") {
				ok = reply("504 unsupported")
				break
			}
			if resp == "" {
				if !reply("334 ") {
					return
				}
				if resp, err = tp.ReadLine(); err != nil {
					return
				}
			}
			raw, err := base64.StdEncoding.DecodeString(resp)
			parts := strings.Split(string(raw), "\x00")
			if err != nil || len(parts) != 3 {
				ok = reply("501 5.5.2 bad AUTH PLAIN response")
				break
			}
			s.mu.Lock()
			s.authID, s.authUser, s.authPass, s.authTLS = parts[0], parts[1], parts[2], secure
			s.mu.Unlock()
			if parts[2] != s.password || !secure {
				ok = reply("535 5.7.8 authentication credentials invalid")
			} else {
				ok = reply("235 2.7.0 authenticated")
			}
		case "*":
			ok = reply("501 5.7.0 AUTH aborted")
		case "MAIL":
			ok = reply("250 ok")
		case "RCPT":
			s.mu.Lock()
			s.rcpts = append(s.rcpts, arg)
			s.mu.Unlock()
			ok = reply("250 ok")
		case "DATA":
			if !reply("354 go") {
				return
			}
			b, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.data = string(b)
			s.mu.Unlock()
			ok = reply("250 2.0.0 queued")
		case "QUIT":
			reply("221 bye")
			return
		default:
			ok = reply("502 unknown")
		}
		if !ok {
			return
		}
	}
}

func (s *tlsServer) url(scheme, user, pass, query string) string {
	u := url.URL{Scheme: scheme, Host: s.ln.Addr().String(), User: url.UserPassword(user, pass), RawQuery: query}
	return u.String()
}

func sendVia(t *testing.T, raw string) error {
	t.Helper()
	cfg, err := ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	return NewSMTPSender(cfg).Send(testCtx(t), Message{
		To: "Ann <ann@example.com>", Subject: "Your pay request", Text: "pay", HTML: "<b>pay</b>",
	})
}

func TestStartTLSAndAuthPlain(t *testing.T) {
	const pass = "p@ss wörd:/?#%"
	for _, implicit := range []bool{false, true} {
		srv := newTLSServer(t, implicit, pass)
		scheme, query := "smtp", "from=billing@example.com&starttls=required&insecure_skip_verify=true"
		if implicit {
			scheme, query = "smtps", "from=billing@example.com&insecure_skip_verify=true"
		}
		if err := sendVia(t, srv.url(scheme, "billing-user", pass, query)); err != nil {
			t.Fatalf("implicit=%v: %v", implicit, err)
		}
		srv.mu.Lock()
		if srv.authID != "" || srv.authUser != "billing-user" || srv.authPass != pass || !srv.authTLS {
			t.Errorf("implicit=%v: AUTH PLAIN got id=%q user=%q pass=%q tls=%v",
				implicit, srv.authID, srv.authUser, srv.authPass, srv.authTLS)
		}
		if !strings.Contains(srv.data, "Subject: Your pay request\n") || !strings.Contains(srv.data, "<b>pay</b>") {
			t.Errorf("implicit=%v: data %q", implicit, srv.data)
		}
		if len(srv.rcpts) != 1 || srv.rcpts[0] != "TO:<ann@example.com>" {
			t.Errorf("implicit=%v: rcpts %q", implicit, srv.rcpts)
		}
		srv.mu.Unlock()
	}
}

func TestAuthRefusedIsPermanentAndHidesPassword(t *testing.T) {
	srv := newTLSServer(t, false, "right")
	err := sendVia(t, srv.url("smtp", "u", "wrong-S3cret", "from=b@example.com&insecure_skip_verify=true"))
	var se *SMTPError
	if !errors.As(err, &se) || se.Code != 535 || se.Stage != "AUTH" || !IsPermanent(err) {
		t.Fatalf("error %v", err)
	}
	if strings.Contains(err.Error(), "S3cret") {
		t.Fatalf("error leaks password: %v", err)
	}
	if srv.data != "" {
		t.Error("message sent after failed AUTH")
	}
}

func TestCertificateIsVerifiedByDefault(t *testing.T) {
	for _, implicit := range []bool{false, true} {
		srv := newTLSServer(t, implicit, "pw")
		scheme := "smtp"
		if implicit {
			scheme = "smtps"
		}
		err := sendVia(t, srv.url(scheme, "u", "pw", "from=b@example.com"))
		if err == nil {
			t.Fatalf("implicit=%v: self-signed certificate accepted", implicit)
		}
		var se *SMTPError
		if errors.As(err, &se) || IsPermanent(err) {
			t.Errorf("implicit=%v: error %v should be a non-permanent TLS error", implicit, err)
		}
		if !strings.Contains(err.Error(), "certificate") {
			t.Errorf("implicit=%v: error %v does not mention the certificate", implicit, err)
		}
		srv.mu.Lock()
		if srv.authPass != "" {
			t.Errorf("implicit=%v: credentials sent despite failed verification", implicit)
		}
		srv.mu.Unlock()
	}
}
