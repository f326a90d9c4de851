package outbound

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingServer is a real loopback server that counts the requests it gets.
func countingServer(t *testing.T, tlsOn bool, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if h != nil {
			h(w, r)
		}
	})
	var s *httptest.Server
	if tlsOn {
		s = httptest.NewTLSServer(wrapped)
	} else {
		s = httptest.NewServer(wrapped)
	}
	t.Cleanup(s.Close)
	return s, &hits
}

func TestPostDelivers(t *testing.T) {
	type seen struct {
		method, ct, ua, sig, host string
		body                      string
	}
	got := make(chan seen, 1)
	srv, _ := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("User-Agent"),
			r.Header.Get("Paysvc-Signature"), r.Host, string(b)}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "thanks")
	})
	c := New(Options{AllowPrivate: true})
	defer c.CloseIdleConnections()
	resp, err := c.Post(context.Background(), srv.URL+"/hook",
		map[string]string{"Paysvc-Signature": "t=1,v1=abc", "Host": "merchant.example"},
		[]byte(`{"id":"evt_1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusAccepted || string(resp.Body) != "thanks" {
		t.Fatalf("got %d %q", resp.Status, resp.Body)
	}
	if resp.Latency <= 0 || resp.RetryAfter != 0 {
		t.Fatalf("latency %v retry-after %v", resp.Latency, resp.RetryAfter)
	}
	s := <-got
	want := seen{"POST", "application/json", userAgent, "t=1,v1=abc", "merchant.example", `{"id":"evt_1"}`}
	if s != want {
		t.Fatalf("server saw %+v, want %+v", s, want)
	}
}

func TestGuardRefusesLoopbackTargets(t *testing.T) {
	srv, hits := countingServer(t, true, nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c := New(Options{}) // guard on
	for _, u := range []string{
		"https://127.0.0.1:" + port + "/hook",
		"https://[::ffff:127.0.0.1]:" + port + "/hook",
		"https://[::1]:" + port + "/hook",
	} {
		_, err := c.Post(context.Background(), u, nil, []byte("{}"))
		if !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("%s: got %v, want ErrForbiddenAddress", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("server was hit %d times", n)
	}
}

// A DNS name is checked on the addresses it resolves to, at dial time:
// "localhost" is not special-cased by Post, the dialer refuses its answer.
func TestGuardRefusesNameResolvingToLoopback(t *testing.T) {
	srv, hits := countingServer(t, true, nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	c := New(Options{})
	_, err := c.Post(context.Background(), "https://localhost:"+port+"/hook", nil, []byte("{}"))
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("got %v, want ErrForbiddenAddress", err)
	}
	if !strings.Contains(err.Error(), "localhost resolves to") {
		t.Fatalf("error should come from the resolving dialer: %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("server was hit %d times", n)
	}

	// The same server is reachable once private targets are allowed, so
	// the refusal above is the guard and nothing else.
	ok := New(Options{AllowPrivate: true})
	defer ok.CloseIdleConnections()
	ok.tr.TLSClientConfig.InsecureSkipVerify = true // httptest's certificate; trust is tested elsewhere
	resp, err := ok.Post(context.Background(), "https://localhost:"+port+"/hook", nil, []byte("{}"))
	if err != nil || resp.Status != http.StatusOK {
		t.Fatalf("with AllowPrivate: %v %v", resp.Status, err)
	}
}

func TestGuardRefusesPlainHTTP(t *testing.T) {
	srv, hits := countingServer(t, false, nil)
	c := New(Options{})
	_, err := c.Post(context.Background(), srv.URL, nil, nil)
	if !errors.Is(err, ErrInvalidEndpoint) {
		t.Fatalf("got %v, want ErrInvalidEndpoint", err)
	}
	_, err = c.Post(context.Background(), "https://u:p@example.com/", nil, nil)
	if !errors.Is(err, ErrInvalidEndpoint) {
		t.Fatalf("userinfo: got %v, want ErrInvalidEndpoint", err)
	}
	if hits.Load() != 0 {
		t.Fatal("server was hit")
	}
}

func TestRedirectsNotFollowed(t *testing.T) {
	target, targetHits := countingServer(t, false, nil)
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redir, _ := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/stolen", code)
		})
		c := New(Options{AllowPrivate: true})
		resp, err := c.Post(context.Background(), redir.URL+"/hook", nil, []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != code {
			t.Fatalf("status %d, want %d", resp.Status, code)
		}
		c.CloseIdleConnections()
	}
	if n := targetHits.Load(); n != 0 {
		t.Fatalf("redirect target was hit %d times", n)
	}
}

func TestSlowServerTimesOut(t *testing.T) {
	srv, _ := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		// Reading the body to EOF lets the server notice the client going
		// away (it only watches the connection once the body is consumed).
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	const timeout = 300 * time.Millisecond
	c := New(Options{AllowPrivate: true, Timeout: timeout})
	start := time.Now()
	resp, err := c.Post(context.Background(), srv.URL, nil, []byte("{}"))
	elapsed := time.Since(start)
	if err == nil {
		t.Fatalf("want a timeout error, got status %d", resp.Status)
	}
	if elapsed < timeout || elapsed > timeout+time.Second {
		t.Fatalf("returned after %v, want about %v", elapsed, timeout)
	}
}

func TestTricklingBodyTimesOut(t *testing.T) {
	srv, _ := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	const timeout = 400 * time.Millisecond
	c := New(Options{AllowPrivate: true, Timeout: timeout})
	start := time.Now()
	resp, err := c.Post(context.Background(), srv.URL, nil, nil)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatal("want a timeout error")
	}
	if resp.Status != http.StatusOK || len(resp.Body) == 0 {
		t.Fatalf("partial response should keep status and bytes read: %d, %d bytes", resp.Status, len(resp.Body))
	}
	if elapsed > timeout+time.Second {
		t.Fatalf("returned after %v, want about %v", elapsed, timeout)
	}
}

func TestContextCancelStopsPost(t *testing.T) {
	srv, _ := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	c := New(Options{AllowPrivate: true})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Post(ctx, srv.URL, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("context deadline not honoured")
	}
}

func endlessBody(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	chunk := []byte(strings.Repeat("A", 32<<10))
	for {
		if _, err := w.Write(chunk); err != nil {
			return
		}
		if r.Context().Err() != nil {
			return
		}
	}
}

func TestEndlessBodyIsCapped(t *testing.T) {
	srv, _ := countingServer(t, false, endlessBody)
	for _, tc := range []struct {
		max  int64
		want int
	}{{1000, 1000}, {0, DefaultMaxResponseBytes}} {
		c := New(Options{AllowPrivate: true, MaxResponseBytes: tc.max, Timeout: 10 * time.Second})
		start := time.Now()
		resp, err := c.Post(context.Background(), srv.URL, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Body) != tc.want {
			t.Fatalf("body %d bytes, want %d", len(resp.Body), tc.want)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v: the cap did not stop the read", d)
		}
	}
}

func TestRetryAfterFromServer(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		header   string
		min, max time.Duration
	}{
		{"120", 120 * time.Second, 120 * time.Second},
		{date, 88 * time.Second, 90 * time.Second},
		{"soon", 0, 0},
	} {
		srv, _ := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", tc.header)
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		c := New(Options{AllowPrivate: true})
		resp, err := c.Post(context.Background(), srv.URL, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusServiceUnavailable {
			t.Fatalf("status %d", resp.Status)
		}
		if resp.RetryAfter < tc.min || resp.RetryAfter > tc.max {
			t.Fatalf("Retry-After %q parsed as %v, want [%v, %v]", tc.header, resp.RetryAfter, tc.min, tc.max)
		}
		c.CloseIdleConnections()
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"5", 5 * time.Second},
		{" 30 ", 30 * time.Second},
		{"3600", time.Hour},
		{"-5", 0},
		{"1.5", 0},
		{"abc", 0},
		{"99999999999999999999", 0},
		{"9223372037", 0}, // would overflow time.Duration
		{"Sun, 01 Mar 2026 12:02:00 GMT", 2 * time.Minute},
		{"Sunday, 01-Mar-26 12:00:30 GMT", 30 * time.Second}, // RFC 850
		{"Sun Mar  1 12:00:10 2026", 10 * time.Second},       // asctime
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0},                 // past
		{"Sun, 01 Mar 2026 25:00:00 GMT", 0},                 // invalid
	}
	for _, c := range cases {
		if got := parseRetryAfter(c.in, now); got != c.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// testCA is a self-signed CA and a leaf certificate it issued for
// localhost / 127.0.0.1 / ::1.
func testCA(t *testing.T) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "paysvc test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: leafKey}
}

func TestHTTPSWithPrivateCA(t *testing.T) {
	pool, leaf := testCA(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted client's handshake failure is expected
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	trusted := New(Options{AllowPrivate: true, RootCAs: pool})
	defer trusted.CloseIdleConnections()
	for _, u := range []string{srv.URL, "https://localhost:" + port} {
		resp, err := trusted.Post(context.Background(), u, nil, []byte("{}"))
		if err != nil {
			t.Fatalf("%s with the CA trusted: %v", u, err)
		}
		if resp.Status != http.StatusOK {
			t.Fatalf("%s: status %d", u, resp.Status)
		}
		if string(resp.Body) != "HTTP/2.0" {
			t.Logf("%s: negotiated %s", u, resp.Body)
		}
	}

	untrusted := New(Options{AllowPrivate: true})
	_, err := untrusted.Post(context.Background(), srv.URL, nil, []byte("{}"))
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("without the CA: got %v, want a certificate verification error", err)
	}

	// Trusting the CA does not lift the guard.
	guarded := New(Options{RootCAs: pool})
	_, err = guarded.Post(context.Background(), srv.URL, nil, []byte("{}"))
	if !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("guarded: got %v, want ErrForbiddenAddress", err)
	}
}

func TestDefaults(t *testing.T) {
	c := New(Options{ConnectTimeout: -1, Timeout: -1, MaxResponseBytes: -1})
	if c.opts.ConnectTimeout != DefaultConnectTimeout || c.opts.Timeout != DefaultTimeout ||
		c.opts.MaxResponseBytes != DefaultMaxResponseBytes {
		t.Fatalf("defaults not applied: %+v", c.opts)
	}
	if c.tr.Proxy != nil {
		t.Fatal("the transport must not use a proxy")
	}
	if c.tr == http.DefaultTransport {
		t.Fatal("the transport must be the client's own")
	}
	if c.tr.MaxIdleConnsPerHost == 0 || c.tr.TLSHandshakeTimeout == 0 || c.tr.ResponseHeaderTimeout == 0 {
		t.Fatalf("transport limits not set: %+v", c.tr)
	}
}
