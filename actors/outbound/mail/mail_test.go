package mail

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	netmail "net/mail"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func newTestSink(t *testing.T) *Sink {
	t.Helper()
	s, err := NewSink("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func sinkSender(t *testing.T, s *Sink) *SMTPSender {
	t.Helper()
	cfg, err := ParseURL(s.URL() + "&from=billing@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return NewSMTPSender(cfg)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// parsed is a received message taken apart with the standard library.
type parsed struct {
	header netmail.Header
	parts  map[string]string // media type -> decoded body (LF line ends)
}

func parseReceived(t *testing.T, data []byte) parsed {
	t.Helper()
	if i := bytes.IndexByte(bytes.ReplaceAll(data, []byte("\r\n"), nil), '\n'); i >= 0 {
		t.Fatalf("bare LF in message data")
	}
	if !bytes.HasSuffix(data, []byte("\r\n")) {
		t.Fatalf("message data does not end with CRLF")
	}
	msg, err := netmail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	p := parsed{header: msg.Header, parts: map[string]string{}}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		t.Fatalf("Content-Type %q, want multipart", mt)
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		part, err := mr.NextPart() // decodes quoted-printable
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		pt, pp, err := mime.ParseMediaType(part.Header.Get("Content-Type"))
		if err != nil {
			t.Fatal(err)
		}
		if pp["charset"] != "utf-8" {
			t.Errorf("%s charset %q", pt, pp["charset"])
		}
		body, err := io.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		p.parts[pt] = strings.ReplaceAll(string(body), "\r\n", "\n")
	}
	if mt != "multipart/alternative" {
		t.Errorf("Content-Type %q, want multipart/alternative", mt)
	}
	return p
}

func TestSendDeliversToSink(t *testing.T) {
	sink := newTestSink(t)
	sender := sinkSender(t, sink)

	subject := "Facture n°42 – paiement dû ✓ " + strings.Repeat("très long sujet ", 6)
	text := "Bonjour Zoë,\n" +
		".this line starts with a dot\n" +
		"..and this one with two\n" +
		".\n" +
		"Pay here: https://pay.example.com/r/abc?x=1&y=2\n" +
		strings.Repeat("x", 75) + ".dot after a soft line break\n" +
		"trailing spaces   \n" +
		"€ 12.50 — merci"
	html := "<p>Bonjour Zoë,</p>\n<p><a href=\"https://pay.example.com/r/abc?x=1&amp;y=2\">Payer 12,50&nbsp;€</a></p>\n.<br>"
	err := sender.Send(testCtx(t), Message{
		To:      "Zoë Müller <zoe@example.com>",
		Subject: subject,
		Text:    text,
		HTML:    html,
		Headers: map[string]string{
			"X-Paysvc-Request-Id": "req-123",
			"Message-ID":          "<req-123@pay.example.com>",
		},
	})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}

	msgs := sink.Messages()
	if len(msgs) != 1 {
		t.Fatalf("sink has %d messages, want 1", len(msgs))
	}
	got := msgs[0]
	if got.From != "billing@example.com" {
		t.Errorf("envelope from %q", got.From)
	}
	if len(got.To) != 1 || got.To[0] != "zoe@example.com" {
		t.Errorf("envelope to %q", got.To)
	}
	if got.Subject != subject {
		t.Errorf("sink subject %q, want %q", got.Subject, subject)
	}
	if got.ID != 1 || got.At.IsZero() {
		t.Errorf("ID %d At %v", got.ID, got.At)
	}

	// The header section is pure ASCII and folded (an encoded word may push
	// a line a little past 78, never near the 998 limit).
	head, _, _ := bytes.Cut(got.Data, []byte("\r\n\r\n"))
	for _, line := range strings.Split(string(head), "\r\n") {
		if len(line) > 100 {
			t.Errorf("header line of %d characters: %q", len(line), line)
		}
		for _, c := range []byte(line) {
			if c >= 0x80 {
				t.Fatalf("non-ASCII byte in header line %q", line)
			}
		}
	}

	p := parseReceived(t, got.Data)
	h := p.header
	if _, err := h.Date(); err != nil {
		t.Errorf("Date: %v", err)
	}
	from, err := h.AddressList("From")
	if err != nil || len(from) != 1 || from[0].Address != "billing@example.com" {
		t.Errorf("From %v %v", from, err)
	}
	to, err := h.AddressList("To")
	if err != nil || len(to) != 1 || to[0].Address != "zoe@example.com" || to[0].Name != "Zoë Müller" {
		t.Errorf("To %v %v", to, err)
	}
	dec, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject"))
	if err != nil || dec != subject {
		t.Errorf("Subject %q (%v), want %q", dec, err, subject)
	}
	if h.Get("Message-Id") != "<req-123@pay.example.com>" {
		t.Errorf("Message-ID %q", h.Get("Message-Id"))
	}
	if h.Get("X-Paysvc-Request-Id") != "req-123" {
		t.Errorf("X-Paysvc-Request-Id %q", h.Get("X-Paysvc-Request-Id"))
	}
	if h.Get("Mime-Version") != "1.0" {
		t.Errorf("MIME-Version %q", h.Get("Mime-Version"))
	}
	if p.parts["text/plain"] != text {
		t.Errorf("text part:\n%q\nwant\n%q", p.parts["text/plain"], text)
	}
	if p.parts["text/html"] != html {
		t.Errorf("html part:\n%q\nwant\n%q", p.parts["text/html"], html)
	}
	if !bytes.Contains(got.Data, []byte("Content-Transfer-Encoding: quoted-printable")) {
		t.Error("parts are not quoted-printable")
	}
}

func TestSendGeneratesDateAndMessageID(t *testing.T) {
	sink := newTestSink(t)
	if err := sinkSender(t, sink).Send(testCtx(t), Message{
		From: "Billing <billing@pay.example.com>", To: "a@example.com, B <b@example.com>",
		Subject: "hello", Text: "only text",
	}); err != nil {
		t.Fatal(err)
	}
	got := sink.Messages()[0]
	if got.From != "billing@pay.example.com" || strings.Join(got.To, ",") != "a@example.com,b@example.com" {
		t.Errorf("envelope %q -> %q", got.From, got.To)
	}
	msg, err := netmail.ReadMessage(bytes.NewReader(got.Data))
	if err != nil {
		t.Fatal(err)
	}
	id := msg.Header.Get("Message-Id")
	if !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@pay.example.com>") {
		t.Errorf("Message-ID %q", id)
	}
	if d, err := msg.Header.Date(); err != nil || time.Since(d) > time.Minute {
		t.Errorf("Date %v %v", d, err)
	}
	if ct := msg.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("single part Content-Type %q", ct)
	}
}

func TestRefusedRecipientIsPermanent(t *testing.T) {
	sink := newTestSink(t)
	sink.Refuse("Bob@Example.com")
	sender := sinkSender(t, sink)
	for _, to := range []string{"nobody@refused.example", "bob@example.com"} {
		err := sender.Send(testCtx(t), Message{To: to, Subject: "s", Text: "t", HTML: "<p>t</p>"})
		var se *SMTPError
		if !errors.As(err, &se) {
			t.Fatalf("%s: error %v (%T), want *SMTPError", to, err, err)
		}
		if se.Code != 550 || se.Stage != "RCPT" || !se.Permanent() || !IsPermanent(err) {
			t.Errorf("%s: %+v permanent=%v", to, se, se.Permanent())
		}
		if want := "recipient refused: 550 5.1.1 <" + to + ">: no such user"; err.Error() != want {
			t.Errorf("%s: Error() = %q, want %q", to, err.Error(), want)
		}
	}
	if n := len(sink.Messages()); n != 0 {
		t.Errorf("sink stored %d messages", n)
	}
}

func TestTemporaryRefusalIsNotPermanent(t *testing.T) {
	sink := newTestSink(t)
	err := sinkSender(t, sink).Send(testCtx(t), Message{To: "x@tempfail.example", Text: "t"})
	var se *SMTPError
	if !errors.As(err, &se) || se.Code != 451 || se.Stage != "RCPT" || se.Permanent() || IsPermanent(err) {
		t.Fatalf("error %v", err)
	}
}

// scriptServer accepts one connection and runs fn on it.
func scriptServer(t *testing.T, fn func(c net.Conn, r *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fn(c, bufio.NewReader(c))
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func rawSender(t *testing.T, addr string) *SMTPSender {
	t.Helper()
	cfg, err := ParseURL("smtp://" + addr + "?from=billing@example.com")
	if err != nil {
		t.Fatal(err)
	}
	return NewSMTPSender(cfg)
}

func TestServerClosingMidConversationIsTemporary(t *testing.T) {
	addr := scriptServer(t, func(c net.Conn, r *bufio.Reader) {
		fmt.Fprint(c, "220 test ready\r\n")
		if _, err := r.ReadString('\n'); err != nil { // EHLO
			return
		}
		fmt.Fprint(c, "250-test\r\n250 8BITMIME\r\n")
		_, _ = r.ReadString('\n') // MAIL FROM, then hang up
	})
	err := rawSender(t, addr).Send(testCtx(t), Message{To: "a@example.com", Text: "t"})
	if err == nil {
		t.Fatal("no error")
	}
	var se *SMTPError
	if errors.As(err, &se) || IsPermanent(err) {
		t.Fatalf("error %v should be a non-permanent network error", err)
	}
	if !strings.Contains(err.Error(), "MAIL") {
		t.Errorf("error %q does not name the stage", err)
	}
}

func TestServerRefusingDataIsReported(t *testing.T) {
	addr := scriptServer(t, func(c net.Conn, r *bufio.Reader) {
		fmt.Fprint(c, "220 test ready\r\n")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch strings.ToUpper(strings.Fields(line)[0]) {
			case "EHLO":
				fmt.Fprint(c, "250 test\r\n")
			case "DATA":
				fmt.Fprint(c, "554-5.7.1 message\r\n554 5.7.1 rejected as spam\r\n")
			case "QUIT":
				fmt.Fprint(c, "221 bye\r\n")
				return
			default:
				fmt.Fprint(c, "250 ok\r\n")
			}
		}
	})
	err := rawSender(t, addr).Send(testCtx(t), Message{To: "a@example.com", Text: "t"})
	var se *SMTPError
	if !errors.As(err, &se) || se.Code != 554 || se.Stage != "DATA" || !IsPermanent(err) {
		t.Fatalf("error %v", err)
	}
	if strings.ContainsAny(se.Message, "\r\n") {
		t.Errorf("message not sanitised: %q", se.Message)
	}
}

func TestContextDeadlineOnSilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept() // accept, then say nothing
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	}()
	sender := rawSender(t, ln.Addr().String())

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = sender.Send(ctx, Message{To: "a@example.com", Text: "t"})
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("Send took %v", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) || IsPermanent(err) {
		t.Fatalf("error %v, want deadline exceeded", err)
	}

	// Cancellation without a deadline interrupts too.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	err = sender.Send(ctx, Message{To: "a@example.com", Text: "t"})
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("Send took %v", elapsed)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want canceled", err)
	}
}

func TestConnectionRefusedIsTemporary(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	err = rawSender(t, addr).Send(testCtx(t), Message{To: "a@example.com", Text: "t"})
	if err == nil || IsPermanent(err) {
		t.Fatalf("error %v", err)
	}
}

func TestStartTLSRequiredButNotOffered(t *testing.T) {
	sink := newTestSink(t)
	cfg, err := ParseURL("smtp://" + sink.Addr() + "?from=b@example.com&starttls=required")
	if err != nil {
		t.Fatal(err)
	}
	err = NewSMTPSender(cfg).Send(testCtx(t), Message{To: "a@example.com", Text: "t"})
	if !errors.Is(err, ErrTLSRequired) || IsPermanent(err) {
		t.Fatalf("error %v", err)
	}
	if len(sink.Messages()) != 0 {
		t.Error("message delivered without TLS")
	}
}

func TestCredentialsAgainstServerWithoutAuth(t *testing.T) {
	sink := newTestSink(t)
	cfg, err := ParseURL("smtp://u:p@" + sink.Addr() + "?from=b@example.com")
	if err != nil {
		t.Fatal(err)
	}
	err = NewSMTPSender(cfg).Send(testCtx(t), Message{To: "a@example.com", Text: "t"})
	if !errors.Is(err, ErrAuthUnsupported) {
		t.Fatalf("error %v", err)
	}
}

// nsAddrEnv tells a copy of this test binary started in a network namespace of its
// own which non-loopback address the namespace gave it.
const nsAddrEnv = "PAYSVC_MAIL_TEST_NS_ADDR"

// nsAddr is an address of TEST-NET-2 (RFC 5737): never routed, and not loopback.
const nsAddr = "198.51.100.7"

// hostNonLoopbackIP is a non-loopback IPv4 address of this machine, or "".
func hostNonLoopbackIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatalf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// inNetworkNamespace runs this test again in a new user and network namespace
// (unshare -rn: root, or unprivileged user namespaces) whose loopback interface
// also carries nsAddr, a non-loopback address, and fails the test with the child's
// output if it fails there. It fails loudly, never skips, when no namespace can be made.
func inNetworkNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("this machine has no non-loopback IPv4 address and no unshare(1) to make one in a network namespace: "+
			"install util-linux, or give the machine an IPv4 address (%v)", err)
	}
	cmd := exec.Command(unshare, "-rn", "sh", "-c", "ip link set lo up && ip addr add "+nsAddr+"/32 dev lo && exec \"$0\" \"$@\"",
		os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nsAddrEnv+"="+nsAddr)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a network namespace with %s (no non-loopback IPv4 address on this machine; unshare -rn needs root "+
			"or unprivileged user namespaces): %v\n%s", nsAddr, err, out)
	}
	t.Logf("passed in a network namespace with %s", nsAddr)
}

// TestNoCredentialsInClearToNonLoopback: a password is never sent in clear text to a
// server that is not on a loopback address. It needs such an address: the machine's,
// or one made in a network namespace of its own; without either it fails, never skips.
func TestNoCredentialsInClearToNonLoopback(t *testing.T) {
	ip := os.Getenv(nsAddrEnv)
	if ip == "" {
		ip = hostNonLoopbackIP(t)
	}
	if ip == "" {
		inNetworkNamespace(t)
		return
	}
	sink, err := NewSink(net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("sink on %s: %v", ip, err)
	}
	defer sink.Close()
	for _, q := range []string{"starttls=optional", "starttls=off"} {
		cfg, err := ParseURL("smtp://user:s3cret@" + sink.Addr() + "?from=b@example.com&" + q)
		if err != nil {
			t.Fatal(err)
		}
		err = NewSMTPSender(cfg).Send(testCtx(t), Message{To: "a@example.com", Text: "t"})
		if !errors.Is(err, ErrInsecureAuth) {
			t.Fatalf("%s: error %v, want ErrInsecureAuth", q, err)
		}
	}
	// Without credentials the same server is fine.
	cfg, _ := ParseURL("smtp://" + sink.Addr() + "?from=b@example.com")
	if err := NewSMTPSender(cfg).Send(testCtx(t), Message{To: "a@example.com", Text: "t"}); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidMessages(t *testing.T) {
	sink := newTestSink(t)
	sender := sinkSender(t, sink)
	cases := map[string]Message{
		"no recipient":        {Text: "t"},
		"bad recipient":       {To: "not an address", Text: "t"},
		"subject injection":   {To: "a@example.com", Subject: "hi\r\nBcc: evil@example.com", Text: "t"},
		"header injection":    {To: "a@example.com", Text: "t", Headers: map[string]string{"X-A": "v\r\nBcc: evil@example.com"}},
		"bad header name":     {To: "a@example.com", Text: "t", Headers: map[string]string{"X A": "v"}},
		"reserved header":     {To: "a@example.com", Text: "t", Headers: map[string]string{"bcc": "evil@example.com"}},
		"empty body":          {To: "a@example.com", Subject: "s"},
		"invalid utf-8":       {To: "a@example.com", Text: "\xff\xfe"},
		"recipient injection": {To: "a@example.com>\r\nRCPT TO:<b@example.com", Text: "t"},
	}
	for name, m := range cases {
		err := sender.Send(testCtx(t), m)
		if !errors.Is(err, ErrInvalidMessage) || !IsPermanent(err) {
			t.Errorf("%s: error %v, want ErrInvalidMessage", name, err)
		}
	}
	noFrom := NewSMTPSender(Config{Host: "127.0.0.1", Port: 1})
	if err := noFrom.Send(testCtx(t), Message{To: "a@example.com", Text: "t"}); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("no sender: %v", err)
	}
	if n := len(sink.Messages()); n != 0 {
		t.Errorf("sink stored %d messages", n)
	}
}

func TestConcurrentSends(t *testing.T) {
	sink := newTestSink(t)
	sender := sinkSender(t, sink)
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- sender.Send(testCtx(t), Message{
				To: fmt.Sprintf("c%d@example.com", i), Subject: fmt.Sprintf("msg %d", i),
				Text: "t", HTML: "<p>t</p>",
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	seen := map[string]bool{}
	for _, m := range sink.Messages() {
		seen[m.Subject] = true
	}
	if len(seen) != n {
		t.Errorf("sink has %d distinct messages, want %d", len(seen), n)
	}
}

func TestFoldHeader(t *testing.T) {
	long := strings.Repeat("word ", 40)
	out, err := foldHeader("Subject", long)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\r\n"), "\r\n") {
		if len(l) > 78 {
			t.Errorf("line %d long: %q", len(l), l)
		}
	}
	unfolded := strings.ReplaceAll(strings.TrimSuffix(out, "\r\n"), "\r\n", "")
	if unfolded != "Subject: "+long {
		t.Errorf("unfolds to %q", unfolded)
	}
	if _, err := foldHeader("X-Big", strings.Repeat("a", 1200)); !errors.Is(err, ErrInvalidMessage) {
		t.Errorf("unfoldable header: %v", err)
	}
}
