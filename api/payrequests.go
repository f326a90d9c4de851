package api

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/wallet"
	"paysvc/actors/outbound/mail"
	"paysvc/actors/values/every"
	"paysvc/actors/values/ids"
	"paysvc/api/edge"
	"paysvc/storage"
)

var reminderDays = map[int]bool{0: true, 1: true, 2: true, 3: true, 7: true}

type payRequestCheckout struct {
	ID        string  `json:"id"`
	URL       string  `json:"url"`
	Amount    *string `json:"amount"`
	Currency  string  `json:"currency"`
	Email     string  `json:"email"`
	FirstName string  `json:"first_name"`
	LastName  string  `json:"last_name"`
	Paid      bool    `json:"paid"`
}

type payRequestJSON struct {
	RequestID                string             `json:"request_id"`
	Checkout                 payRequestCheckout `json:"checkout"`
	PaymentStatus            string             `json:"payment_status"`
	SentStatus               string             `json:"sent_status"`
	Reason                   string             `json:"reason"`
	AutosendReminder         int                `json:"autosend_reminder"`
	AutosendReminderDatetime *time.Time         `json:"autosend_reminder_datetime"`
	ReminderSent             bool               `json:"reminder_sent"`
	Archived                 bool               `json:"archived"`
	FailedDetails            *string            `json:"failed_details"`
	CreatedAt                time.Time          `json:"created_at"`
	UpdatedAt                time.Time          `json:"updated_at"`
}

// checkoutURL is where a customer pays a checkout session.
func (s *Server) checkoutURL(id string) string {
	return s.cfg.PublicBaseURL + "/checkout/" + id + "/"
}

func renderPayRequest(pr storage.PayRequest, co storage.Checkout, url string) payRequestJSON {
	status := "Pending"
	if co.Paid {
		status = "Paid"
	}
	var amount *string
	if co.Amount != nil && co.Amount.Sign() > 0 {
		a := co.Amount.String()
		amount = &a
	}
	return payRequestJSON{RequestID: pr.RequestID, PaymentStatus: status, SentStatus: pr.SentStatus, Reason: pr.Reason,
		AutosendReminder: pr.AutosendReminder, AutosendReminderDatetime: pr.ReminderDueAt, ReminderSent: pr.ReminderSent,
		Archived: pr.Archived, FailedDetails: pr.FailedDetails, CreatedAt: pr.CreatedAt, UpdatedAt: pr.UpdatedAt,
		Checkout: payRequestCheckout{ID: co.CheckoutID, URL: url, Amount: amount, Currency: co.Currency, Email: pr.Email,
			FirstName: pr.FirstName, LastName: pr.LastName, Paid: co.Paid}}
}

// createPayRequest makes a checkout session for a customer and emails its link at
// once. A failed email is recorded (sent_status FAILED, failed_details), the request
// itself is kept.
func (s *Server) createPayRequest(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	first, err := b.Str("first_name", true, 45, namePattern)
	if err != nil {
		return err
	}
	last, err := b.Str("last_name", true, 45, namePattern)
	if err != nil {
		return err
	}
	email, err := b.Str("email", true, 254, emailPattern)
	if err != nil {
		return err
	}
	currency, err := b.Str("currency", true, 3, nil)
	if err != nil {
		return err
	}
	if !wallet.Currencies[currency] {
		return edge.Invalid("currency", "Currency must be one of KES, USD, EUR, GBP.")
	}
	amount, hasAmount, err := b.Amount("amount", false)
	if err != nil {
		return err
	}
	if hasAmount && amount.Sign() <= 0 {
		return edge.Invalid("amount", "Amount must be greater than 0.")
	}
	if hasAmount {
		if err := s.payableAmount(currency, amount); err != nil {
			return err
		}
	}
	reason, err := b.Str("reason", false, 500, nil)
	if err != nil {
		return err
	}
	days := 0
	if raw, ok := b["autosend_reminder"]; ok && string(raw) != "null" {
		d, err := strconv.Atoi(strings.Trim(string(raw), `"`))
		if err != nil || !reminderDays[d] {
			return edge.Invalid("autosend_reminder", "autosend_reminder must be 0, 1, 2, 3 or 7.")
		}
		days = d
	}
	// The tariffs are the session's: its payments are priced by them whatever the
	// paying request says (readPaymentTarget's callers).
	tariffs := map[string]string{}
	for _, f := range []string{"card_tarrif", "mobile_tarrif"} {
		v, err := b.Str(f, false, 20, nil)
		if err != nil {
			return err
		}
		if v != "" && v != "BUSINESS-PAYS" && v != "CUSTOMER-PAYS" {
			return edge.Invalid(f, f+" must be BUSINESS-PAYS or CUSTOMER-PAYS.")
		}
		tariffs[f] = tarOrDefault(v)
	}
	p := edge.PrincipalOf(c)
	now := s.now().UTC().Truncate(time.Microsecond)
	co := storage.Checkout{CheckoutID: ids.UUID(), MerchantID: p.MerchantID, Currency: currency, Email: &email,
		CardTarrif: tariffs["card_tarrif"], MobileTarrif: tariffs["mobile_tarrif"], FirstName: &first, LastName: &last,
		CreatedAt: now, UpdatedAt: now}
	if hasAmount {
		co.Amount = &amount
	}
	pr := storage.PayRequest{MerchantID: p.MerchantID, CheckoutID: co.CheckoutID,
		FirstName: first, LastName: last, Email: email, Reason: reason, AutosendReminder: days, SentStatus: "PENDING",
		CreatedAt: now, UpdatedAt: now}
	if days > 0 {
		due := now.Add(time.Duration(days) * s.cfg.ReminderDay)
		pr.ReminderDueAt = &due
	}
	ctx := c.Request().Context()
	if err := s.redraw(c, "PR", func(id string) error {
		pr.RequestID = id
		return storage.InsertPayRequest(ctx, s.db, co, pr)
	}); err != nil {
		return err
	}
	url := s.checkoutURL(co.CheckoutID)
	pr.SentStatus, pr.FailedDetails = "SENT", nil
	if err := s.sendPayRequestMail(ctx, pr, co, url, false); err != nil {
		s.log.Warn("pay request email not sent", "request_id", pr.RequestID, "err", err)
		details := mailFailure(err)
		pr.SentStatus, pr.FailedDetails = "FAILED", &details
	}
	if err := storage.SetPayRequestSent(context.WithoutCancel(ctx), s.db, pr.RequestID, pr.SentStatus, pr.FailedDetails); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"detail": renderPayRequest(pr, co, url)})
}

func (s *Server) getPayRequest(c echo.Context) error {
	ctx := c.Request().Context()
	p := edge.PrincipalOf(c)
	pr, err := storage.GetPayRequest(ctx, s.db, p.MerchantID, c.Param("request_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return edge.NotFound("Pay request not found.")
	}
	if err != nil {
		return err
	}
	co, err := storage.GetCheckout(ctx, s.db, p.MerchantID, pr.CheckoutID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"detail": renderPayRequest(pr, co, s.checkoutURL(co.CheckoutID))})
}

// sendPayRequestMail emails the payment link; the error text is safe to store and
// show (it describes the SMTP refusal, never a credential).
func (s *Server) sendPayRequestMail(ctx context.Context, pr storage.PayRequest, co storage.Checkout, url string, reminder bool) error {
	if s.mailer == nil {
		return errors.New("email is not configured")
	}
	what := "a payment"
	if co.Amount != nil && co.Amount.Sign() > 0 {
		what = co.Currency + " " + co.Amount.String()
	}
	subject := "Payment request: " + what
	if reminder {
		subject = "Reminder: " + subject
	}
	text := fmt.Sprintf("Hello %s,\n\nYou have a payment request for %s.\n%s\n\nPay here: %s\n", pr.FirstName, what, pr.Reason, url)
	htmlBody := fmt.Sprintf("<p>Hello %s,</p><p>You have a payment request for %s.</p><p>%s</p><p><a href=\"%s\">Pay now</a></p>",
		html.EscapeString(pr.FirstName), html.EscapeString(what), html.EscapeString(pr.Reason), html.EscapeString(url))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return s.mailer.Send(sctx, mail.Message{From: s.cfg.MailFrom, To: pr.Email, Subject: subject, Text: text, HTML: htmlBody,
		Headers: map[string]string{"X-Paysvc-Merchant": pr.MerchantID, "X-Paysvc-Pay-Request": pr.RequestID}})
}

// now is the clock reminders are due by (Config.Now): a test moves it past a
// reminder's day instead of waiting for it.
func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

// RunReminders sends due pay-request reminders, once each, until ctx ends (the
// job every.PayRequestReminders). A reminder not sent is released to be tried
// again, or for good when the mail server refused it for good.
func (s *Server) RunReminders(ctx context.Context, interval time.Duration) error {
	log := s.log.With("component", "reminders")
	return every.Run(ctx, log, every.Job{Name: every.PayRequestReminders, Interval: interval, Run: func(ctx context.Context) error {
		due, err := storage.ClaimDueReminders(ctx, s.db, s.now(), 50)
		if err != nil {
			return fmt.Errorf("claim reminders: %w", err)
		}
		failed := 0
		for _, pr := range due {
			co, err := storage.GetCheckout(ctx, s.db, pr.MerchantID, pr.CheckoutID)
			if err == nil {
				err = s.sendPayRequestMail(ctx, pr, co, s.checkoutURL(co.CheckoutID), true)
			}
			if err != nil {
				failed++
				log.Warn("reminder not sent", "request_id", pr.RequestID, "err", err)
				if rerr := storage.ReleaseReminder(ctx, s.db, pr.RequestID, mailFailure(err), !mail.IsPermanent(err)); rerr != nil {
					log.Error("release reminder", "request_id", pr.RequestID, "err", rerr)
				}
			}
		}
		if failed > 0 {
			return fmt.Errorf("%d of %d reminders not sent (logged above)", failed, len(due))
		}
		return nil
	}})
}

// mailFailure is what a merchant may see of a failed email: the mail server's own
// refusal, or a generic text (a network error would show internal addresses).
func mailFailure(err error) string {
	var se *mail.SMTPError
	if errors.As(err, &se) {
		return se.Error()
	}
	if errors.Is(err, mail.ErrInvalidMessage) {
		return "The email could not be built (invalid address or content)."
	}
	return "The mail server could not be reached; the email was not sent."
}
