package main

// `paysvc listen` and `paysvc trigger`: webhooks on a developer's machine against a
// sandbox server, as `stripe listen` and `stripe trigger` do. listen reads the
// merchant's event stream (GET /api/v1/events/listen/) and POSTs each body to a
// local URL, signed like a real delivery of a default webhook (body {topic, data})
// with a whsec_ secret of the session, which keys webhook-signature (its base64
// bytes, as Standard Webhooks libraries read it) and, as the challenge,
// X-SERVICE-Signature; trigger asks
// the server for a sample event (POST /api/v1/events/trigger/).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"paysvc/actors/outbound/webhooks"
	"paysvc/api/edge"
	"paysvc/cmd/paysvc/service"
)

const (
	listenUsage  = "usage: paysvc listen --forward-to URL | --print [--api URL] [--events collection_event,...] [--key KEY]"
	triggerUsage = "usage: paysvc trigger TOPIC [--api URL] [--key KEY]\n\ntopics: " // + the topics
	// listenIdle is how long a stream may stay silent (the server sends a heartbeat
	// every 15 s) before it is taken for dead and reopened.
	listenIdle = 45 * time.Second
	// listenOverlap is how far before the last sign of life a reconnect asks to
	// resume from (clock skew between us and the server); repeats are dropped by id.
	listenOverlap = 2 * time.Second
)

// sandboxKey is the --key flag or PAYSVC_SECRET_KEY; only a test secret key.
func sandboxKey(flagKey string, getenv func(string) string) (string, error) {
	k := strings.TrimSpace(flagKey)
	if k == "" {
		k = strings.TrimSpace(getenv("PAYSVC_SECRET_KEY"))
	}
	switch {
	case k == "":
		return "", usageError{"a sandbox secret key is needed: --key or PAYSVC_SECRET_KEY"}
	case strings.HasPrefix(k, edge.SecretPrefix+"live_"):
		return "", errors.New("refusing a live key: listen and trigger work only against a sandbox server, with a test secret key (" +
			edge.SecretPrefix + "test_...)")
	case !strings.HasPrefix(k, edge.SecretPrefix+"test_"):
		return "", usageError{"the key must be a sandbox secret key (" + edge.SecretPrefix + "test_...)"}
	}
	return k, nil
}

// sandboxTarget is the server (apiBase of --api) and the key (sandboxKey) that
// listen and trigger call it with.
func sandboxTarget(base, flagKey string, getenv func(string) string) (apiURL, key string, err error) {
	if apiURL, err = apiBase(base); err != nil {
		return "", "", err
	}
	if key, err = sandboxKey(flagKey, getenv); err != nil {
		return "", "", err
	}
	return apiURL, key, nil
}

// apiBase checks a --api value and returns it without a trailing slash.
func apiBase(v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageError{fmt.Sprintf("--api %q: want an http(s) URL such as http://127.0.0.1:8080", v)}
	}
	return strings.TrimRight(v, "/"), nil
}

// apiError is the server's refusal, in its own words.
func apiError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(b, &e) == nil && e.Detail != "" {
		return fmt.Errorf("server answered %d: %s", resp.StatusCode, e.Detail)
	}
	return fmt.Errorf("server answered %d", resp.StatusCode)
}

func triggerCmd(ctx context.Context, cfg service.Config, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trigger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("api", "http://"+cfg.HTTPAddr, "base URL of the sandbox paysvc API")
	keyFlag := fs.String("key", "", "sandbox secret key (default $PAYSVC_SECRET_KEY)")
	usage := triggerUsage + strings.Join(webhooks.Topics, ", ")
	var topic string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") { // the topic may come before the flags
		topic, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error() + "\n" + usage}
	}
	if topic == "" && fs.NArg() > 0 {
		topic = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return usageError{usage}
	}
	if !slices.Contains(webhooks.Topics, topic) {
		return usageError{fmt.Sprintf("unknown topic %q\n%s", topic, usage)}
	}
	apiURL, key, err := sandboxTarget(*base, *keyFlag, getenv)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"topic": topic})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, apiURL+"/api/v1/events/trigger/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("trigger %s: %w", topic, apiError(resp))
	}
	var out struct {
		EventID string `json:"event_id"`
		Topic   string `json:"topic"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("trigger: undecodable answer: %w", err)
	}
	return printJSON(stdout, out)
}

// listener is one `paysvc listen` session.
type listener struct {
	api, key, events, forward, secret string
	print                             bool   // each event as a JSON line on stdout
	signingKey                        []byte // the bytes behind secret
	stream, deliver                   *http.Client
	stdout, stderr                    io.Writer
	ready                             sync.Once
	seen                              map[string]bool // event ids forwarded (a stream may repeat one)
	order                             []string        // seen, oldest first, to bound it
	lastAlive                         time.Time       // last byte from the stream
}

func listenCmd(ctx context.Context, cfg service.Config, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	forward := fs.String("forward-to", "", "URL each event is POSTed to, e.g. http://localhost:3000/hook (required)")
	base := fs.String("api", "http://"+cfg.HTTPAddr, "base URL of the sandbox paysvc API")
	events := fs.String("events", "", "comma-separated topics to forward (default: all of "+strings.Join(webhooks.Topics, ", ")+")")
	keyFlag := fs.String("key", "", "sandbox secret key (default $PAYSVC_SECRET_KEY)")
	print := fs.Bool("print", false, "print each event as one JSON line {id, topic, data} on stdout (with or without --forward-to)")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error() + "\n" + listenUsage}
	}
	if fs.NArg() > 0 || (*forward == "" && !*print) {
		return usageError{listenUsage}
	}
	if u, err := url.Parse(*forward); *forward != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return usageError{fmt.Sprintf("--forward-to %q: want an http(s) URL such as http://localhost:3000/hook", *forward)}
	}
	var wanted []string
	for _, t := range strings.Split(*events, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if !slices.Contains(webhooks.Topics, t) {
			return usageError{fmt.Sprintf("--events: unknown topic %q (topics: %s)", t, strings.Join(webhooks.Topics, ", "))}
		}
		wanted = append(wanted, t)
	}
	apiURL, key, err := sandboxTarget(*base, *keyFlag, getenv)
	if err != nil {
		return err
	}
	raw, err := webhooks.NewSigningSecret()
	if err != nil {
		return err
	}
	l := &listener{api: apiURL, key: key, events: strings.Join(wanted, ","), forward: *forward, print: *print,
		secret: webhooks.FormatSecret(raw), signingKey: raw,
		stream: &http.Client{}, stdout: stdout, stderr: stderr, seen: map[string]bool{},
		deliver: &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // as real deliveries: no redirects followed
		}}}
	return l.run(ctx)
}

// permanentError is a refusal that retrying cannot fix (bad key, live server).
type permanentError struct{ error }

// run keeps a stream open until ctx ends, reconnecting with backoff.
func (l *listener) run(ctx context.Context) error {
	backoff := 500 * time.Millisecond
	for {
		connected, err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return perm.error
		}
		if connected {
			backoff = 500 * time.Millisecond
		}
		fmt.Fprintf(l.stderr, "%s  stream interrupted (%v); reconnecting in %s\n", time.Now().Format(time.DateTime), err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// listenOnce reads one stream until it ends; connected reports whether it opened.
func (l *listener) listenOnce(ctx context.Context) (connected bool, err error) {
	q := url.Values{}
	if l.events != "" {
		q.Set("events", l.events)
	}
	if !l.lastAlive.IsZero() {
		q.Set("since", strconv.FormatInt(l.lastAlive.Add(-listenOverlap).UnixMilli(), 10))
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, l.api+"/api/v1/events/listen/?"+q.Encode(), nil)
	if err != nil {
		return false, permanentError{err}
	}
	req.Header.Set("Authorization", "Bearer "+l.key)
	req.Header.Set("Accept", "text/event-stream")
	// No X-Paysvc-Listen-Challenge: the stream's bodies are {topic, data}, as a
	// webhook's that did not opt in to the challenge echo.
	resp, err := l.stream.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound:
		return false, permanentError{fmt.Errorf("%s has no listen stream: is it a sandbox paysvc? (%w)", l.api, apiError(resp))}
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return false, apiError(resp)
	default:
		return false, permanentError{apiError(resp)}
	}
	l.ready.Do(func() {
		if l.forward == "" { // stdout is the events' alone, for a pipe
			fmt.Fprintln(l.stderr, "Ready! Printing events as JSON lines (^C to quit)")
			return
		}
		fmt.Fprintf(l.stdout, "Ready! Your webhook signing secret is %s (^C to quit)\n", l.secret)
		fmt.Fprintf(l.stdout, "Forwarding events to %s\n", l.forward)
	})
	idle := time.AfterFunc(listenIdle, cancel) // a silent stream is a dead one
	defer idle.Stop()
	l.lastAlive = time.Now()
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	var id, event string
	var data [][]byte
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if sctx.Err() != nil && ctx.Err() == nil {
				return true, fmt.Errorf("no heartbeat for %s", listenIdle)
			}
			return true, fmt.Errorf("stream ended: %w", err)
		}
		idle.Reset(listenIdle)
		l.lastAlive = time.Now()
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) == 0 { // end of a message
			if len(data) > 0 {
				l.forwardEvent(ctx, id, event, bytes.Join(data, []byte("\n")))
			}
			id, event, data = "", "", nil
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "id":
			id = string(value)
		case "event":
			event = string(value)
		case "data":
			data = append(data, append([]byte(nil), value...))
		}
	}
}

// forwardEvent POSTs one event's body to the forward URL, signed with the session
// secret like a real delivery, and prints one line for it.
func (l *listener) forwardEvent(ctx context.Context, id, topic string, body []byte) {
	if id != "" && l.seen[id] {
		return
	}
	if id != "" {
		l.seen[id] = true
		if l.order = append(l.order, id); len(l.order) > 10_000 {
			delete(l.seen, l.order[0])
			l.order = l.order[1:]
		}
	}
	if l.print {
		l.printEvent(id, topic, body)
	}
	if l.forward == "" {
		return
	}
	start := time.Now()
	status := "error"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.forward, bytes.NewReader(body))
	if err == nil {
		for k, v := range webhooks.DeliveryHeaders(l.secret, l.signingKey, id, start, body) {
			req.Header.Set(k, v)
		}
		var resp *http.Response
		if resp, err = l.deliver.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			status = strconv.Itoa(resp.StatusCode)
		}
	}
	line := fmt.Sprintf("%s  %-22s %s  [%s] POST %s (%dms)", start.Format(time.DateTime), topic, id, status, l.forward,
		time.Since(start).Milliseconds())
	if err != nil {
		line += ": " + err.Error()
	}
	fmt.Fprintln(l.stdout, line)
}

// printEvent writes one event as a JSON line: its id, topic and the body's data
// exactly as the stream gave it (with --forward-to too, before the delivery's
// own line).
func (l *listener) printEvent(id, topic string, body []byte) {
	var b struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Data) == 0 {
		b.Data = json.RawMessage("null")
	}
	line, err := json.Marshal(struct {
		ID    string          `json:"id"`
		Topic string          `json:"topic"`
		Data  json.RawMessage `json:"data"`
	}{id, topic, b.Data})
	if err != nil {
		fmt.Fprintf(l.stderr, "event %s: not printable: %v\n", id, err)
		return
	}
	fmt.Fprintf(l.stdout, "%s\n", line)
}
