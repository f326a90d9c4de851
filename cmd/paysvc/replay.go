package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"paysvc/api/edge"
	"paysvc/cmd/paysvc/service"
)

const replayUsage = "usage: paysvc replay EVENT_ID [--api URL] [--key SECRET_KEY]"

// replayCmd resends one of the merchant's webhook events through the API
// (POST /api/v1/webhooks/events/{id}/replay/): the exact stored bytes, recorded as
// an attempt, no new event record. It works with a live key too: replaying a failed
// event after fixing an endpoint is an everyday operation, not a sandbox one.
func replayCmd(ctx context.Context, cfg service.Config, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("api", "http://"+cfg.HTTPAddr, "base URL of the paysvc API")
	keyFlag := fs.String("key", "", "secret key (default $PAYSVC_SECRET_KEY)")
	var eventID string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		eventID, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error() + "\n" + replayUsage}
	}
	if eventID == "" && fs.NArg() == 1 {
		eventID = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usageError{replayUsage}
	}
	if eventID == "" {
		return usageError{replayUsage}
	}
	apiURL, err := apiBase(*base)
	if err != nil {
		return err
	}
	key := strings.TrimSpace(*keyFlag)
	if key == "" {
		key = strings.TrimSpace(getenv("PAYSVC_SECRET_KEY"))
	}
	if !strings.HasPrefix(key, edge.SecretPrefix) {
		return usageError{"a secret key is needed: --key or PAYSVC_SECRET_KEY (" + edge.SecretPrefix + "...)"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		apiURL+"/api/v1/webhooks/events/"+url.PathEscape(eventID)+"/replay/", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("replay %s: %w", eventID, apiError(resp))
	}
	var out any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("replay: undecodable answer: %w", err)
	}
	return printJSON(stdout, out)
}
