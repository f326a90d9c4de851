package sandbox

import (
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/http"
	"net/mail"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
)

type sandboxMailJSON struct {
	From       string    `json:"from"`
	To         []string  `json:"to"`
	Subject    string    `json:"subject"`
	PayRequest string    `json:"pay_request_id"`
	Text       string    `json:"text"` // the decoded text/plain part
	Body       string    `json:"body"` // the raw message
	ReceivedAt time.Time `json:"received_at"`
}

// Mail lists what the embedded SMTP sink received for the merchant (sandbox
// only): the pay-request emails a developer would otherwise have to fetch from a
// real mailbox.
func (s *Tools) Mail(c echo.Context) error {
	out := []sandboxMailJSON{}
	if s.sink != nil {
		merchant := edge.PrincipalOf(c).MerchantID
		for _, m := range s.sink.Messages() {
			msg, err := mail.ReadMessage(strings.NewReader(string(m.Data)))
			if err != nil || msg.Header.Get("X-Paysvc-Merchant") != merchant {
				continue
			}
			out = append(out, sandboxMailJSON{From: m.From, To: m.To, Subject: m.Subject,
				PayRequest: msg.Header.Get("X-Paysvc-Pay-Request"), Text: plainText(msg), Body: string(m.Data), ReceivedAt: m.At})
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"count": len(out), "next": nil, "previous": nil, "results": out})
}

// plainText returns the decoded text/plain part of a message ("" if none).
func plainText(msg *mail.Message) string {
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	decode := func(r io.Reader, enc string) string {
		if strings.EqualFold(enc, "quoted-printable") {
			r = quotedprintable.NewReader(r)
		}
		b, _ := io.ReadAll(io.LimitReader(r, 1<<20))
		return string(b)
	}
	if mt == "text/plain" {
		return decode(msg.Body, msg.Header.Get("Content-Transfer-Encoding"))
	}
	if !strings.HasPrefix(mt, "multipart/") {
		return ""
	}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err != nil {
			return ""
		}
		if pt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); pt == "text/plain" {
			return decode(p, p.Header.Get("Content-Transfer-Encoding"))
		}
	}
}
