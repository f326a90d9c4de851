package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/actors/outbound/webhooks"
	"paysvc/actors/outbound/webhooks/dispatch"
	"paysvc/actors/outbound/webhooks/outbound"
	"paysvc/api/edge"
	"paysvc/storage"
)

type webhookEventJSON struct {
	ID         string          `json:"id"`
	WebhookID  string          `json:"webhook_id"`
	Topic      string          `json:"topic"`
	Data       json.RawMessage `json:"data"`
	Status     string          `json:"status"`
	Attempts   int             `json:"attempts"`
	LastStatus *int            `json:"last_http_status"`
	LastError  *string         `json:"last_error"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

func renderDelivery(d storage.Delivery) webhookEventJSON {
	var body struct {
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(d.Body, &body) // our own bytes: always a JSON object
	return webhookEventJSON{ID: d.EventID, WebhookID: d.WebhookID, Topic: d.Topic, Data: body.Data, Status: d.Status,
		Attempts: d.Attempts, LastStatus: d.LastStatus, LastError: d.LastError, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
}

// listWebhookEvents lists the merchant's event records with their delivery status,
// newest first; ?topic=, ?status= and ?since= (RFC 3339) filter.
func (s *Server) listWebhookEvents(c echo.Context) error {
	pg, err := pageOf(c)
	if err != nil {
		return err
	}
	since := time.Time{}
	if v := c.QueryParam("since"); v != "" {
		if since, err = time.Parse(time.RFC3339, v); err != nil {
			return edge.Invalid("since", "since must be an RFC 3339 time, e.g. 2026-01-31T00:00:00Z.")
		}
	}
	status := c.QueryParam("status")
	switch status {
	case "", "PENDING", "PROCESSING", "DELIVERED", "FAILED":
	default:
		return edge.Invalid("status", "status must be PENDING, PROCESSING, DELIVERED or FAILED.")
	}
	rows, total, err := storage.ListDeliveries(c.Request().Context(), s.db, edge.PrincipalOf(c).MerchantID, c.QueryParam("topic"), status,
		since, pg.size, pg.offset())
	if err != nil {
		return err
	}
	out := make([]webhookEventJSON, len(rows))
	for i, d := range rows {
		out[i] = renderDelivery(d)
	}
	return c.JSON(http.StatusOK, pg.list(c, total, out))
}

// replayWebhookEvent resends the exact stored bytes of an event to its webhooks,
// records the attempts, and creates no new event record. The bytes are never
// rewritten, also after a rotation (the signatures use the current secrets); a body
// that would echo a challenge the webhook has withdrawn is not sent
// (webhooks.EchoesWithdrawnChallenge).
func (s *Server) replayWebhookEvent(c echo.Context) error {
	ctx := c.Request().Context()
	ds, err := storage.EventDeliveries(ctx, s.db, edge.PrincipalOf(c).MerchantID, c.Param("event_id"))
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		return edge.NotFound("Event not found.")
	}
	results := []map[string]any{}
	for _, d := range ds {
		if !d.IsActive { // a disabled webhook is sent nothing, replays included
			results = append(results, map[string]any{"webhook_id": d.WebhookID, "http_status": 0, "delivered": false,
				"error": "The webhook is disabled; enable it (PATCH is_active true) and replay again."})
			continue
		}
		if webhooks.EchoesWithdrawnChallenge(d.Body, d.Challenge, d.IncludeChallenge) {
			results = append(results, map[string]any{"webhook_id": d.WebhookID, "http_status": 0, "delivered": false,
				"error": "Not sent: the stored body echoes this webhook's current challenge, which it no longer echoes. " +
					"Change the challenge (rotate-secret with a new challenge) and replay again."})
			continue
		}
		resp, err := dispatch.Replay(ctx, s.db, s.webhookClient, d)
		if errors.Is(err, dispatch.ErrDeliveryGone) {
			continue // pruned or its webhook deleted meanwhile: nothing to replay to
		}
		r := map[string]any{"webhook_id": d.WebhookID, "http_status": resp.Status, "delivered": err == nil && resp.Status == 200}
		if err != nil {
			r["error"] = outbound.Describe(err)
		}
		results = append(results, r)
	}
	return c.JSON(http.StatusOK, map[string]any{"id": c.Param("event_id"), "replays": results})
}
