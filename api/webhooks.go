package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/outbound/webhooks"
	"paysvc/api/edge"
	"paysvc/storage"
)

// webhookJSON is the Webhook configuration of the interface. The challenge (the
// key of X-SERVICE-Signature) is never part of it; the Standard Webhooks signing
// secret only of the answers that make one (signedWebhookJSON).
type webhookJSON struct {
	ID                  string    `json:"id"`
	Endpoint            string    `json:"endpoint"`
	IsActive            bool      `json:"is_active"`
	CollectionEvent     bool      `json:"collection_event"`
	SendMoneyEvent      bool      `json:"send_money_event"`
	ReversalEvent       bool      `json:"reversal_event"`
	WalletTransferEvent bool      `json:"wallet_transfer_event"`
	SubscriptionEvent   bool      `json:"subscription_event"`
	FailuresCount       int       `json:"failures_count"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
	// IncludeChallenge: delivery bodies echo the challenge (opt-in, default false;
	// docs/security.md explains the risk).
	IncludeChallenge bool `json:"include_challenge"`
	// PreviousSecretExpiresAt is when the signing secret the last rotation retired
	// stops signing; null when none signs any more. The secret itself is never shown.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

// signedWebhookJSON is the answer of create and rotate-secret: the only time the
// webhook's Standard Webhooks signing secret (whsec_...) is shown.
type signedWebhookJSON struct {
	webhookJSON
	SigningSecret string `json:"signing_secret"`
}

func renderWebhook(w storage.Webhook) webhookJSON {
	return webhookJSON{ID: w.WebhookID, Endpoint: w.Endpoint, IsActive: w.IsActive, CollectionEvent: w.CollectionEvent,
		SendMoneyEvent: w.SendMoneyEvent, ReversalEvent: w.ReversalEvent, WalletTransferEvent: w.WalletTransferEvent,
		SubscriptionEvent: w.SubscriptionEvent, FailuresCount: w.FailuresCount, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
		IncludeChallenge: w.IncludeChallenge, PreviousSecretExpiresAt: previousExpiry(w, time.Now())}
}

// previousExpiry is the end of the webhook's rotation window, or nil when no
// previous secret signs at now.
func previousExpiry(w storage.Webhook, now time.Time) *time.Time {
	if w.PreviousSecretExpiresAt == nil || len(w.PreviousSigningSecret) == 0 || !now.Before(*w.PreviousSecretExpiresAt) {
		return nil
	}
	t := w.PreviousSecretExpiresAt.UTC()
	return &t
}

func renderSignedWebhook(w storage.Webhook) signedWebhookJSON {
	return signedWebhookJSON{webhookJSON: renderWebhook(w), SigningSecret: webhooks.FormatSecret(w.SigningSecret)}
}

// applyWebhookFields reads the editable fields present in the body onto w.
func (s *Server) applyWebhookFields(b edge.Body, w *storage.Webhook, creating bool) error {
	if b.Has("endpoint") || creating {
		ep, err := b.Str("endpoint", true, 500, nil)
		if err != nil {
			return err
		}
		if err := s.validateEndpoint(ep); err != nil {
			// The checks' own words about the merchant's URL (no lookups are made at
			// this point), without the Go package prefixes.
			msg := strings.ReplaceAll(err.Error(), "outbound: ", "")
			return edge.Invalid("endpoint", "Invalid endpoint: "+msg+".")
		}
		w.Endpoint = ep
	}
	if b.Has("challenge") || creating {
		ch, err := b.Str("challenge", true, 200, nil)
		if err != nil {
			return err
		}
		if len(ch) < 8 {
			return edge.Invalid("challenge", "The challenge (signing secret) must be at least 8 characters.")
		}
		w.Challenge = ch
	}
	flags := map[string]*bool{"collection_event": &w.CollectionEvent, "send_money_event": &w.SendMoneyEvent,
		"reversal_event": &w.ReversalEvent, "wallet_transfer_event": &w.WalletTransferEvent, "subscription_event": &w.SubscriptionEvent,
		"include_challenge": &w.IncludeChallenge}
	for name, dst := range flags {
		v, err := b.Bool(name, *dst)
		if err != nil {
			return err
		}
		*dst = v
	}
	return nil
}

func (s *Server) listWebhooks(c echo.Context) error {
	return listOwn(s, c, storage.ListWebhooks, renderWebhook)
}

func (s *Server) createWebhook(c echo.Context) error {
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	w := storage.Webhook{MerchantID: edge.PrincipalOf(c).MerchantID, IsActive: true, CreatedAt: now, UpdatedAt: now}
	if err := s.applyWebhookFields(b, &w, true); err != nil {
		return err
	}
	if w.SigningSecret, err = webhooks.NewSigningSecret(); err != nil {
		return err
	}
	if err := s.redraw(c, "WH", func(id string) error {
		w.WebhookID = id
		return storage.InsertWebhook(c.Request().Context(), s.db, w)
	}); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, renderSignedWebhook(w))
}

func (s *Server) pathWebhook(c echo.Context) (storage.Webhook, error) {
	w, err := storage.GetWebhook(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("webhook_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return w, edge.NotFound("Webhook not found.")
	}
	return w, err
}

func (s *Server) getWebhook(c echo.Context) error {
	w, err := s.pathWebhook(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderWebhook(w))
}

// updateWebhook changes the fields given (PATCH); is_active true re-enables a
// disabled webhook and clears its failure count.
func (s *Server) updateWebhook(c echo.Context) error {
	w, err := s.pathWebhook(c)
	if err != nil {
		return err
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	if err := s.applyWebhookFields(b, &w, false); err != nil {
		return err
	}
	if b.Has("is_active") {
		active, err := b.Bool("is_active", w.IsActive)
		if err != nil {
			return err
		}
		if active && !w.IsActive {
			w.FailuresCount = 0
		}
		w.IsActive = active
	}
	if err := s.saveWebhook(c.Request().Context(), w); err != nil {
		return err
	}
	w, err = s.pathWebhook(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderWebhook(w))
}

// maxPreviousWindow bounds expire_previous_in: a retired key that signs for longer
// than a week is a second live secret, not a changeover.
const maxPreviousWindow = 7 * 24 * time.Hour

// defaultPreviousWindow is the retired key's window when the body names none: a day
// to deploy the new secret, as Stripe gives by default.
const defaultPreviousWindow = 24 * time.Hour

// rotateWebhookSecret makes a new Standard Webhooks signing secret, shown once in
// the answer, and replaces the challenge when the body gives one. The retired
// secret keeps signing beside the new one for expire_previous_in seconds (default a
// day; 0 stops it at once; at most a week): every delivery signed in that window,
// retries and replays included, carries both signatures, the new one first. Only one
// previous secret is kept: a second rotation inside the window retires the secret
// the first one made, and the older one stops at once. The challenge has no window
// (X-SERVICE-Signature is one value). Bodies stay the bytes first recorded.
func (s *Server) rotateWebhookSecret(c echo.Context) error {
	w, err := s.pathWebhook(c)
	if err != nil {
		return err
	}
	b, err := edge.ReadBody(c)
	if err != nil {
		return err
	}
	if b.Has("challenge") {
		if err := s.applyWebhookFields(edge.Body{"challenge": b["challenge"]}, &w, false); err != nil {
			return err
		}
	}
	window, _, err := b.Int("expire_previous_in", false, int(defaultPreviousWindow/time.Second), 0, int(maxPreviousWindow/time.Second))
	if err != nil {
		return err
	}
	w.PreviousSigningSecret, w.PreviousSecretExpiresAt = nil, nil
	if window > 0 {
		until := time.Now().UTC().Truncate(time.Microsecond).Add(time.Duration(window) * time.Second)
		w.PreviousSigningSecret, w.PreviousSecretExpiresAt = w.SigningSecret, &until
	}
	if w.SigningSecret, err = webhooks.NewSigningSecret(); err != nil {
		return err
	}
	if err := s.saveWebhook(c.Request().Context(), w); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, renderSignedWebhook(w))
}

// saveWebhook stores a changed webhook. Stored delivery bodies are not touched, also
// when the challenge or its echo changes: a replay resends the exact bytes the
// merchant was sent (docs/security.md, Webhook signing, says why an old challenge in
// them is no leak, and when a body is not sent again).
func (s *Server) saveWebhook(ctx context.Context, w storage.Webhook) error {
	return storage.UpdateWebhook(ctx, s.db, w)
}

func (s *Server) deleteWebhook(c echo.Context) error {
	err := storage.DeleteWebhook(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.Param("webhook_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return edge.NotFound("Webhook not found.")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"id": c.Param("webhook_id"), "deleted": true})
}
