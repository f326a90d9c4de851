package mail

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"
)

// rawClient speaks SMTP to the sink line by line.
type rawClient struct {
	t  *testing.T
	c  net.Conn
	tp *textproto.Conn
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { c.Close() })
	r := &rawClient{t: t, c: c, tp: textproto.NewConn(c)}
	r.expect(220)
	return r
}

func (r *rawClient) expect(code int) string {
	r.t.Helper()
	got, msg, err := r.tp.ReadResponse(0)
	if err != nil {
		r.t.Fatalf("reading reply (want %d): %v", code, err)
	}
	if got != code {
		r.t.Fatalf("reply %d %q, want %d", got, msg, code)
	}
	return msg
}

func (r *rawClient) cmd(line string, code int) string {
	r.t.Helper()
	if err := r.tp.PrintfLine("%s", line); err != nil {
		r.t.Fatal(err)
	}
	return r.expect(code)
}

func TestSinkConversation(t *testing.T) {
	sink := newTestSink(t)
	r := dialRaw(t, sink.Addr())
	r.cmd("FOO bar", 502)
	r.cmd("STARTTLS", 502)
	r.cmd("AUTH PLAIN AHUAcA==", 502)
	r.cmd("MAIL FROM:<a@example.com>", 503) // before EHLO
	r.cmd("EHLO", 501)
	ehlo := r.cmd("EHLO client.example.com", 250)
	for _, ext := range []string{"SIZE 10485760", "8BITMIME", "ENHANCEDSTATUSCODES"} {
		if !strings.Contains(ehlo, ext) {
			t.Errorf("EHLO reply %q lacks %s", ehlo, ext)
		}
	}
	r.cmd("RCPT TO:<x@example.com>", 503) // before MAIL
	r.cmd("DATA", 503)
	r.cmd("MAIL FROM:<a@example.com> BODY=8BITMIME", 250)
	r.cmd("MAIL FROM:<a@example.com>", 503) // nested
	r.cmd("DATA", 503)                      // no recipients
	r.cmd("RCPT TO:<>", 501)
	r.cmd("RCPT TO:<x@example.com>", 250)
	r.cmd("RSET", 250)
	r.cmd("DATA", 503) // RSET cleared the transaction
	r.cmd("NOOP", 250)
	r.cmd("mail from: <a@example.com>", 250) // case and space tolerated
	r.cmd("RCPT TO:<x@example.com>", 250)
	r.cmd("RCPT TO:<y@refused.example>", 550)
	r.cmd("RCPT TO:<z@example.com>", 250)
	r.cmd("DATA", 354)
	body := "Subject: =?utf-8?q?caf=C3=A9?=\r\n\r\n..leading dot\r\n...two\r\n.\r\nnot the end\r\n"
	stuffed := strings.ReplaceAll("\r\n"+body, "\r\n.", "\r\n..")[2:]
	if _, err := io.WriteString(r.c, stuffed+".\r\n"); err != nil {
		t.Fatal(err)
	}
	r.expect(250)
	r.cmd("QUIT", 221)

	msgs := sink.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	if m.From != "a@example.com" || strings.Join(m.To, ",") != "x@example.com,z@example.com" {
		t.Errorf("envelope %q -> %q", m.From, m.To)
	}
	if string(m.Data) != body {
		t.Errorf("data %q, want %q", m.Data, body)
	}
	if m.Subject != "café" {
		t.Errorf("subject %q", m.Subject)
	}
}

func TestSinkHELOAndNullSender(t *testing.T) {
	sink := newTestSink(t)
	r := dialRaw(t, sink.Addr())
	r.cmd("HELO client", 250)
	r.cmd("MAIL FROM:<>", 250)
	r.cmd("RCPT TO:<postmaster@example.com>", 250)
	r.cmd("DATA", 354)
	if _, err := io.WriteString(r.c, "no headers at all\r\n.\r\n"); err != nil {
		t.Fatal(err)
	}
	r.expect(250)
	if m := sink.Messages(); len(m) != 1 || m[0].From != "" || m[0].Subject != "" {
		t.Fatalf("%+v", m)
	}
}

func TestSinkSizeLimit(t *testing.T) {
	sink := newTestSink(t)
	r := dialRaw(t, sink.Addr())
	r.cmd("EHLO c", 250)
	r.cmd(fmt.Sprintf("MAIL FROM:<a@example.com> SIZE=%d", SinkMaxMessageSize+1), 552)
	r.cmd("MAIL FROM:<a@example.com>", 250)
	r.cmd("RCPT TO:<b@example.com>", 250)
	r.cmd("DATA", 354)
	line := strings.Repeat("x", 998) + "\r\n"
	w := bufio.NewWriter(r.c)
	for written := 0; written <= SinkMaxMessageSize; written += len(line) {
		w.WriteString(line)
	}
	w.WriteString(".\r\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r.expect(552)
	r.cmd("NOOP", 250) // the connection is still usable
	r.cmd("DATA", 503) // and the transaction is gone
	if n := len(sink.Messages()); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
}

func TestSinkLongLines(t *testing.T) {
	sink := newTestSink(t)
	r := dialRaw(t, sink.Addr())
	r.cmd("EHLO "+strings.Repeat("a", 10000), 500)
	r.cmd("EHLO c", 250)
	r.cmd("MAIL FROM:<a@example.com>", 250)
	r.cmd("RCPT TO:<b@example.com>", 250)
	r.cmd("DATA", 354)
	long := "." + strings.Repeat("y", 20000) + "\r\n" // longer than the read buffer
	if _, err := io.WriteString(r.c, "Subject: long\r\n\r\n"+"."+long+".\r\n"); err != nil {
		t.Fatal(err)
	}
	r.expect(250)
	m := sink.Messages()
	if len(m) != 1 || string(m[0].Data) != "Subject: long\r\n\r\n"+long {
		t.Fatalf("long line not kept intact")
	}
}

func TestSinkKeepsLastMessages(t *testing.T) {
	sink := newTestSink(t)
	r := dialRaw(t, sink.Addr())
	r.cmd("EHLO c", 250)
	const total = SinkMaxMessages + 5
	for i := 1; i <= total; i++ {
		r.cmd("MAIL FROM:<a@example.com>", 250)
		r.cmd("RCPT TO:<b@example.com>", 250)
		r.cmd("DATA", 354)
		fmt.Fprintf(r.c, "Subject: m%d\r\n\r\nbody\r\n.\r\n", i)
		r.expect(250)
	}
	msgs := sink.Messages()
	if len(msgs) != SinkMaxMessages {
		t.Fatalf("%d messages kept", len(msgs))
	}
	if msgs[0].Subject != "m6" || msgs[0].ID != 6 || msgs[len(msgs)-1].Subject != fmt.Sprintf("m%d", total) {
		t.Errorf("kept %s (id %d) .. %s", msgs[0].Subject, msgs[0].ID, msgs[len(msgs)-1].Subject)
	}
}

func TestSinkHangsUpOnTooManyErrors(t *testing.T) {
	sink := newTestSink(t)
	r := dialRaw(t, sink.Addr())
	for range sinkMaxErrors {
		r.cmd("BOGUS", 502)
	}
	r.cmd("BOGUS", 421)
	if _, err := r.tp.ReadLine(); err == nil {
		t.Fatal("connection still open")
	}
}

func TestSinkCloseDropsConnections(t *testing.T) {
	sink, err := NewSink("")
	if err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, sink.Addr())
	r.cmd("EHLO c", 250)
	done := make(chan error, 1)
	go func() { done <- sink.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs with an open connection")
	}
	if _, err := r.tp.ReadLine(); err == nil {
		t.Fatal("connection still open after Close")
	}
	if err := sink.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", sink.Addr(), time.Second); err == nil {
		t.Error("still listening after Close")
	}
}
