package mail

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	netmail "net/mail"
	"net/textproto"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrInvalidMessage is wrapped by every error about the Message itself (bad
// address, header injection, empty body, ...). Such a send can never succeed,
// so IsPermanent reports true for it.
var ErrInvalidMessage = errors.New("mail: invalid message")

// Limits on a Message.
const (
	maxRecipients = 100
	maxLineLen    = 998 // RFC 5322 2.1.1
	foldAt        = 78  // RFC 5322 2.1.1, recommended
)

// reservedHeaders are written by the sender and may not be set through
// Message.Headers (Cc and Bcc because they would not match the envelope).
var reservedHeaders = map[string]bool{
	"From": true, "To": true, "Cc": true, "Bcc": true, "Subject": true,
	"Mime-Version": true, "Content-Type": true, "Content-Transfer-Encoding": true,
}

// envelope is a built message: SMTP envelope plus RFC 5322 data with CRLF line
// endings (not yet dot-stuffed).
type envelope struct {
	from  string
	rcpts []string
	data  []byte
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidMessage}, args...)...)
}

// buildMessage validates m and renders it. m.From must already have the
// configured default applied.
func buildMessage(m Message, now time.Time) (*envelope, error) {
	from, to, err := checkMessage(m)
	if err != nil {
		return nil, err
	}
	// Headers, in order. Caller headers may replace Date and Message-ID.
	custom, err := customHeaders(m)
	if err != nil {
		return nil, err
	}

	var b bytes.Buffer
	write := func(name, value string) error {
		line, err := foldHeader(name, value)
		if err != nil {
			return err
		}
		b.WriteString(line)
		return nil
	}
	popCustom := func(canon, fallback string) (string, string) {
		if f, ok := custom[canon]; ok {
			delete(custom, canon)
			return f.name, f.value
		}
		return "", fallback
	}

	name, date := popCustom("Date", now.Format(time.RFC1123Z))
	if name == "" {
		name = "Date"
	}
	if err := write(name, date); err != nil {
		return nil, err
	}
	if err := write("From", from.String()); err != nil {
		return nil, err
	}
	toStrs := make([]string, len(to))
	rcpts := make([]string, len(to))
	for i, a := range to {
		toStrs[i] = a.String()
		rcpts[i] = a.Address
	}
	if err := write("To", strings.Join(toStrs, ", ")); err != nil {
		return nil, err
	}
	if err := write("Subject", mime.QEncoding.Encode("utf-8", m.Subject)); err != nil {
		return nil, err
	}
	name, msgID := popCustom("Message-Id", "")
	if name == "" {
		name, msgID = "Message-ID", newMessageID(from.Address)
	}
	if err := write(name, msgID); err != nil {
		return nil, err
	}
	if err := write("MIME-Version", "1.0"); err != nil {
		return nil, err
	}
	rest := make([]field, 0, len(custom))
	for _, f := range custom {
		rest = append(rest, f)
	}
	sort.Slice(rest, func(i, j int) bool {
		return textproto.CanonicalMIMEHeaderKey(rest[i].name) < textproto.CanonicalMIMEHeaderKey(rest[j].name)
	})
	for _, f := range rest {
		if err := write(f.name, mime.QEncoding.Encode("utf-8", f.value)); err != nil {
			return nil, err
		}
	}

	if err := writeBody(&b, m, write); err != nil {
		return nil, err
	}
	return &envelope{from: from.Address, rcpts: rcpts, data: b.Bytes()}, nil
}

// checkMessage checks a message's addresses and text before anything is built.
func checkMessage(m Message) (*netmail.Address, []*netmail.Address, error) {
	from, err := netmail.ParseAddress(strings.TrimSpace(m.From))
	if err != nil {
		if strings.TrimSpace(m.From) == "" {
			return nil, nil, invalid("no sender (set Message.From or from= in the SMTP URL)")
		}
		return nil, nil, invalid("From %q: %v", m.From, err)
	}
	if strings.TrimSpace(m.To) == "" {
		return nil, nil, invalid("no recipient")
	}
	to, err := netmail.ParseAddressList(m.To)
	if err != nil {
		return nil, nil, invalid("To %q: %v", m.To, err)
	}
	if len(to) > maxRecipients {
		return nil, nil, invalid("%d recipients (at most %d)", len(to), maxRecipients)
	}
	if strings.ContainsAny(m.Subject, "\r\n") {
		return nil, nil, invalid("Subject contains a line break")
	}
	if !utf8.ValidString(m.Subject) || !utf8.ValidString(m.Text) || !utf8.ValidString(m.HTML) {
		return nil, nil, invalid("Subject, Text and HTML must be valid UTF-8")
	}
	if m.Text == "" && m.HTML == "" {
		return nil, nil, invalid("empty body (set Text, HTML or both)")
	}

	return from, to, nil
}

// field is one header a caller gave, under the name as given.
type field struct{ name, value string }

// customHeaders are a message's own headers by canonical name, checked.
func customHeaders(m Message) (map[string]field, error) {
	custom := make(map[string]field, len(m.Headers))
	for name, value := range m.Headers {
		if !validHeaderName(name) {
			return nil, invalid("header name %q", name)
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if reservedHeaders[canon] {
			return nil, invalid("header %s is set by the sender; use the Message fields", name)
		}
		if _, dup := custom[canon]; dup {
			return nil, invalid("header %s given twice", name)
		}
		if strings.ContainsAny(value, "\r\n") {
			return nil, invalid("header %s contains a line break", name)
		}
		if !utf8.ValidString(value) {
			return nil, invalid("header %s is not valid UTF-8", name)
		}
		custom[canon] = field{name, value}
	}

	return custom, nil
}

// writeBody writes the body after the headers: multipart/alternative when the
// message has both a text and an HTML part, else the one part.
func writeBody(b *bytes.Buffer, m Message, write func(name, value string) error) error {
	switch {
	case m.Text != "" && m.HTML != "":
		mw := multipart.NewWriter(b)
		ct := mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": mw.Boundary()})
		if err := write("Content-Type", ct); err != nil {
			return err
		}
		b.WriteString("\r\n")
		for _, part := range []struct{ typ, body string }{{"text/plain", m.Text}, {"text/html", m.HTML}} {
			w, err := mw.CreatePart(textproto.MIMEHeader{
				"Content-Type":              {part.typ + "; charset=utf-8"},
				"Content-Transfer-Encoding": {"quoted-printable"},
			})
			if err != nil {
				return err
			}
			if err := writeQP(w, part.body); err != nil {
				return err
			}
		}
		if err := mw.Close(); err != nil {
			return err
		}
	default:
		typ, body := "text/plain", m.Text
		if m.Text == "" {
			typ, body = "text/html", m.HTML
		}
		b.WriteString("Content-Type: " + typ + "; charset=utf-8\r\n")
		b.WriteString("Content-Transfer-Encoding: quoted-printable\r\n\r\n")
		if err := writeQP(b, body); err != nil {
			return err
		}
		b.WriteString("\r\n")
	}
	return nil
}

// writeQP writes s quoted-printable; line breaks (LF or CRLF) become CRLF.
func writeQP(w interface{ Write([]byte) (int, error) }, s string) error {
	qp := quotedprintable.NewWriter(w)
	if _, err := qp.Write([]byte(s)); err != nil {
		return err
	}
	return qp.Close()
}

// foldHeader renders "Name: value\r\n", folding at spaces so that lines stay
// within 78 characters where the value allows it. A line that cannot be
// folded under the hard limit of 998 characters is an error.
func foldHeader(name, value string) (string, error) {
	line := name + ": " + value
	var out strings.Builder
	for len(line) > foldAt {
		// Last space at or before foldAt that is not the one after the colon.
		cut := strings.LastIndexByte(line[:foldAt+1], ' ')
		if cut <= len(name)+1 && out.Len() == 0 || cut <= 0 {
			// No usable space before the limit: take the first one after.
			next := strings.IndexByte(line[foldAt:], ' ')
			if next < 0 {
				break
			}
			cut = foldAt + next
		}
		out.WriteString(line[:cut])
		out.WriteString("\r\n")
		line = line[cut:] // keeps the space, which becomes the fold's WSP
	}
	out.WriteString(line)
	out.WriteString("\r\n")
	for _, l := range strings.Split(out.String(), "\r\n") {
		if len(l) > maxLineLen {
			return "", invalid("header %s is too long", name)
		}
	}
	return out.String(), nil
}

func validHeaderName(name string) bool {
	if name == "" || len(name) > 76 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 33 || c > 126 || c == ':' {
			return false
		}
	}
	return true
}

func newMessageID(fromAddr string) string {
	domain := "paysvc.local"
	if at := strings.LastIndexByte(fromAddr, '@'); at >= 0 && at < len(fromAddr)-1 {
		domain = fromAddr[at+1:]
	}
	var r [16]byte
	_, _ = rand.Read(r[:])
	return "<" + hex.EncodeToString(r[:]) + "@" + domain + ">"
}
