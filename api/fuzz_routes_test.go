package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"paysvc/api"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// TestFuzzEveryRoute sends random and hostile requests to every route of the API,
// against the whole service (engine, kfake Kafka, PostgreSQL), with a secret key, a
// public key, a status signature and no credentials. The routes come from the Echo
// router itself, so a route added later is fuzzed without anyone touching this test.
// It asserts what the edge promises (docs/security.md): no answer is a 5xx (a 504
// from a stalled engine included), every error is the documented JSON shape, and
// afterwards the merchant's writes still go through (no command partition is stuck).
//
// The seed is fixed (PAYSVC_FUZZ_SEED overrides it, PAYSVC_FUZZ_ROUNDS scales it),
// so a failure is reproducible; each failure prints the request that caused it.
func TestFuzzEveryRoute(t *testing.T) {
	t.Parallel()
	seed, rounds := uint64(9), 30
	if v, err := strconv.ParseUint(os.Getenv("PAYSVC_FUZZ_SEED"), 10, 64); err == nil {
		seed = v
	}
	if v, err := strconv.Atoi(os.Getenv("PAYSVC_FUZZ_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	env := servicetest.Start(t, func(c *service.Config) { c.API.ReplyTimeout = 5 * time.Second })
	b := newBundle(t, env, "Fuzzed")
	b.deposit(t, b.settlement, "1000000") // so payouts and transfers get as far as the engine
	f := newFuzzer(t, b, seed)

	routes := apiRoutes(t)
	if len(routes) < 30 {
		t.Fatalf("found only %d routes in the router: the enumeration is broken", len(routes))
	}
	var reqs []fuzzRequest
	for round := 0; round < rounds; round++ {
		for _, rt := range routes {
			for _, auth := range []string{"secret", "public", "signature", "none"} {
				reqs = append(reqs, f.request(rt, auth))
			}
		}
	}
	// Hostile bytes in every path parameter of every route, one value each.
	for _, rt := range routes {
		if strings.Contains(rt.Path, ":") || strings.Contains(rt.Path, "*") {
			for _, v := range hostilePathValues {
				reqs = append(reqs, fuzzRequest{method: rt.Method, path: fillPath(rt.Path, func() string { return v }),
					body: f.body(), headers: f.auth("secret")})
			}
		}
	}
	t.Logf("seed %d: %d requests over %d routes", seed, len(reqs), len(routes))

	var mu sync.Mutex
	var failures []string
	statuses := map[int]int{}
	work := make(chan fuzzRequest)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				status, msg := f.send(r)
				mu.Lock()
				statuses[status]++
				if msg != "" {
					failures = append(failures, msg)
				}
				mu.Unlock()
			}
		}()
	}
	for _, r := range reqs {
		work <- r
	}
	close(work)
	wg.Wait()
	t.Logf("answers by status: %v", statuses)
	// A fuzz that only ever hears 4xx never reached the engine: the plausible bodies
	// must get some writes through, or this test proves nothing about partitions.
	if statuses[200]+statuses[201] < len(routes) {
		t.Errorf("only %d successful answers: the plausible bodies no longer pass validation", statuses[200]+statuses[201])
	}
	sort.Strings(failures)
	for i, msg := range failures {
		if i == 20 {
			t.Errorf("... and %d more", len(failures)-20)
			break
		}
		t.Error(msg)
	}

	// The merchant's partition still moves: a public-key write and a secret-key
	// write, each answered by the engine.
	publicWrite(t, b, "after-fuzz")
	r := b.post("/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "After fuzz"})
	if r.Status != 201 {
		t.Fatalf("a wallet after the fuzz: %d %s (the partition is stuck?)", r.Status, r.Body)
	}
	// Whatever money the fuzz moved (deposits, transfers, collections, card
	// payments still clearing, approved payment files still paying, refunds) is
	// conserved and every hold is an open one's. The wallet above was applied
	// after every command the fuzz issued for this merchant; rail outcomes still
	// coming are whole batches, so the check holds at this instant too.
	ledgerOK(t, b)
}

// apiRoutes lists the routes of a server built exactly as the service builds it.
func apiRoutes(t *testing.T) []*echo.Route {
	t.Helper()
	srv := api.New(api.Config{PublicBaseURL: "http://localhost"}, api.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	e, ok := srv.Handler().(*echo.Echo)
	if !ok {
		t.Fatalf("Handler is %T, not *echo.Echo: update the route enumeration", srv.Handler())
	}
	var out []*echo.Route
	seen := map[string]bool{}
	for _, rt := range e.Routes() {
		m := rt.Method
		if m == echo.RouteNotFound {
			m = http.MethodGet
		}
		if k := m + " " + rt.Path; !seen[k] {
			seen[k] = true
			out = append(out, &echo.Route{Method: m, Path: rt.Path, Name: rt.Name})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Method+out[i].Path < out[j].Method+out[j].Path })
	return out
}

var paramSegment = regexp.MustCompile(`:[a-zA-Z_]+|\*`)

// fillPath replaces each :param (and *) of a route with a value, URL-escaped except
// for values that are already escapes (the hostile ones).
func fillPath(path string, value func() string) string {
	return paramSegment.ReplaceAllStringFunc(path, func(string) string { return value() })
}

// hostilePathValues are already percent-encoded: bytes PostgreSQL cannot store,
// lone surrogates encoded as UTF-8, very long, traversal, emoji, RTL, numbers.
var hostilePathValues = []string{
	"%00", "a%00b", "%ff", "%c3%28", "%ed%a0%80", "%ed%b0%80", "%c0%80", strings.Repeat("x", 5000), "..%2f..%2fetc",
	"%f0%9f%98%80", "%e2%80%8f%d9%85", "1e400", "-1", "99999999999999999999999", "null", "%22%7B%7D", "%20",
}

// hostileJSON are JSON values (raw text) to put in any field.
var hostileJSON = []string{
	`"\u0000"`, `"a\u0000@b.co"`, `"\ud800"`, `"x\udc00"`, `"\ud83d"`, `"\ude00\ud83d"`, "\"\xff\"", "\"a\xed\xa0\x80\"", "\"\xc0\x80\"",
	`"\ud83d\ude00"`, `"\u200f\u0645\u0631\u062d\u0628\u0627"`, `"😀"`, `""`, `" "`, `"null"`,
	`1e400`, `-1e400`, `99999999999999999999999`, `"99999999999999999999999"`, `1e2`, `"1e2"`, `-1`, `"-0.01"`, `0`, `-0`, `0.001`,
	`"999999999999999.99"`, `999999999999999.99`, `"1000000000000000"`, `"NaN"`, `"Infinity"`, `1.7976931348623157e308`,
	`true`, `false`, `null`, `[]`, `{}`, `[null]`, `{"a":"\u0000"}`, `[1,"\ud800"]`,
	`"` + strings.Repeat("A", 20000) + `"`, `"` + strings.Repeat("é", 3000) + `"`,
	`"<script>alert(1)</script>"`, `"' OR 1=1 --"`, `"%00"`, `"\\u0000"`,
}

// plausible are well-formed values for every field the handlers read, so a body
// built from them gets past validation and reaches the engine; hostile values are
// then mixed in. Unknown fields are ignored by every endpoint (docs/compat.md), so one
// body can carry all of them.
func (f *fuzzer) plausible() map[string]any {
	return map[string]any{
		"currency": "KES", "amount": "100", "phone_number": "254708374149", "method": "M-PESA", "api_ref": "fuzz-" + strconv.Itoa(f.rnd.IntN(1e6)),
		"email": "payer@example.com", "first_name": "Jane", "last_name": "Doe", "country": "KE", "label": "L" + strconv.Itoa(f.rnd.IntN(1e9)),
		"wallet_type": "WORKING", "wallet_id": f.b.settlement, "narrative": "fuzz", "provider": "MPESA-B2C", "requires_approval": "YES",
		"card_number": "4242424242424242", "expiry": "12/39", "cvv": "123", "reason": "fuzz", "url": "https://example.com/hook",
		"event": "collection_event", "topic": "collection_event", "challenge": "c", "invoice_id": f.invoice,
		"tracking_id":  f.pick(f.files), // so approve, cancel and status reach the engine
		"transactions": []any{map[string]any{"account": "254708374149", "amount": "100", "name": "A"}},
	}
}

type fuzzer struct {
	t       *testing.T
	b       *bundle
	mu      sync.Mutex
	rnd     *rand.Rand
	fields  []string
	invoice string   // an invoice of the merchant, for status
	invSig  string   // its signature token
	coID    string   // a checkout of the merchant
	coSig   string   // its signature token
	files   []string // tracking ids of payment files awaiting approval
	client  *http.Client
}

func newFuzzer(t *testing.T, b *bundle, seed uint64) *fuzzer {
	t.Helper()
	f := &fuzzer{t: t, b: b, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), fields: handlerFields(t),
		client: &http.Client{Timeout: 30 * time.Second}}
	r := b.env.Do("POST", "/api/v1/payment/mpesa-stk-push/", map[string]any{"public_key": b.public, "phone_number": "254708374149",
		"amount": "10", "api_ref": "fuzz-seed"})
	if r.Status != 200 {
		t.Fatalf("seed invoice: %d %s", r.Status, r.Body)
	}
	m := r.Map(t)
	f.invoice, f.invSig = m["invoice"].(map[string]any)["invoice_id"].(string), m["signature"].(string)
	r = b.env.Do("POST", "/api/v1/checkout/", map[string]any{"public_key": b.public, "currency": "KES", "amount": "100"})
	if r.Status != 200 {
		t.Fatalf("seed checkout: %d %s", r.Status, r.Body)
	}
	m = r.Map(t)
	f.coID, f.coSig = m["id"].(string), m["signature"].(string)
	for i := 0; i < 5; i++ {
		r = b.post("/api/v1/send-money/initiate/", map[string]any{"currency": "KES", "provider": "MPESA-B2C", "requires_approval": "YES",
			"transactions": []any{map[string]any{"account": "254708374149", "amount": "100", "name": "Seed"}}})
		if r.Status != 200 {
			t.Fatalf("seed payment file: %d %s", r.Status, r.Body)
		}
		f.files = append(f.files, r.Map(t)["tracking_id"].(string))
	}
	return f
}

// handlerFields are the body fields the handlers read, taken from their source so
// that a field added later is fuzzed too.
func handlerFields(t *testing.T) []string {
	t.Helper()
	// The handlers are this package's and its product packages' (api/console,
	// api/sandbox...): every non-test Go file under this directory.
	re := regexp.MustCompile(`\.(?:Str|Text|Amount|Bool|Has)\("([a-z_]+)"`)
	set := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "node_modules" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			set[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(set) < 20 {
		t.Fatalf("found only %d body fields in the handlers: the field scan is broken", len(set))
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type fuzzRequest struct {
	method, path string
	body         []byte
	headers      []string
}

func (f *fuzzer) intn(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rnd.IntN(n)
}

func (f *fuzzer) pick(list []string) string { return list[f.intn(len(list))] }

// request makes one request for a route: sometimes a hostile path value, a body
// that is plausible with hostile fields mixed in (or garbage), and the credentials.
func (f *fuzzer) request(rt *echo.Route, auth string) fuzzRequest {
	path := fillPath(rt.Path, func() string {
		switch f.intn(4) {
		case 0:
			return f.pick(hostilePathValues)
		case 1:
			return f.b.settlement
		case 2:
			return f.coID
		}
		return "x" + strconv.Itoa(f.intn(1000))
	})
	if f.intn(5) == 0 {
		path += "?" + f.pick([]string{"page", "page_size", "provider", "topic", "status", "since", "events"}) + "=" +
			f.pick(append([]string{"1", "0", "-1", "99999999999999999999", "MPESA-B2C"}, hostilePathValues...))
	}
	body := f.body()
	headers := f.auth(auth)
	if auth == "public" || auth == "signature" {
		body = f.withFields(body, auth)
	}
	if f.intn(6) == 0 {
		headers = append(headers, "Idempotency-Key", f.pick([]string{"k-" + strconv.Itoa(f.intn(50)), "k\xff", strings.Repeat("k", 300), "😀"}))
	}
	return fuzzRequest{method: rt.Method, path: path, body: body, headers: headers}
}

func (f *fuzzer) auth(kind string) []string {
	switch kind {
	case "secret":
		return []string{"Authorization", "Bearer " + f.b.secret}
	case "public":
		if f.intn(2) == 0 {
			return []string{"X-SERVICE-PUBLIC-API-KEY", f.b.public}
		}
	}
	return nil
}

// withFields adds the body credentials of public and signature requests to a JSON
// object body (a body that is not an object stays as it is).
func (f *fuzzer) withFields(body []byte, auth string) []byte {
	t := bytes.TrimSpace(body)
	if len(t) < 2 || t[0] != '{' {
		return body
	}
	var extra string
	switch auth {
	case "public":
		extra = `"public_key":"` + f.b.public + `"`
	case "signature":
		if f.intn(2) == 0 {
			extra = `"signature":"` + f.invSig + `","invoice_id":"` + f.invoice + `"`
		} else {
			extra = `"signature":"` + f.coSig + `","checkout_id":"` + f.coID + `"`
		}
	}
	if string(t) == "{}" {
		return []byte("{" + extra + "}")
	}
	return append([]byte("{"+extra+","), t[1:]...)
}

// body is a request body: mostly a plausible object with one to three fields made
// hostile, sometimes a structural attack (deep nesting, a huge array, garbage).
func (f *fuzzer) body() []byte {
	switch f.intn(12) {
	case 0:
		return []byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000))
	case 1:
		return []byte(`{"transactions":[` + strings.TrimSuffix(strings.Repeat(`{"account":"254708374149","amount":"10","name":"\u0000"},`, 12000), ",") + `]}`)
	case 2:
		return []byte(f.pick(hostileJSON))
	case 3:
		return []byte("\xff\xfe{\"a\x00\":1")
	case 4:
		return nil
	case 5:
		return []byte(`{"amount":` + f.pick(hostileJSON) + `,"amount":"10"}`) // duplicate keys
	}
	obj := f.plausible()
	raw := map[string]json.RawMessage{}
	for k, v := range obj {
		raw[k], _ = json.Marshal(v)
	}
	for n := 1 + f.intn(3); n > 0; n-- {
		field := f.pick(f.fields)
		switch f.intn(6) {
		case 0:
			delete(raw, field)
		case 1: // hostile inside a transaction
			raw["transactions"] = json.RawMessage(`[{"account":"254708374149","amount":"100","name":"A","` + field + `":` + f.pick(hostileJSON) + `}]`)
		default:
			raw[field] = json.RawMessage(f.pick(hostileJSON))
		}
	}
	// encoding/json would re-escape the hostile raw values; write the object by hand.
	var sb strings.Builder
	sb.WriteByte('{')
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Quote(k) + ":")
		sb.Write(raw[k])
	}
	if f.intn(8) == 0 {
		sb.WriteString(`,"\u0000key":1`)
	}
	sb.WriteByte('}')
	return []byte(sb.String())
}

// send makes a request and returns its status (0 if none) and why its answer is
// unacceptable ("" if fine).
// unreadBodyCut says the request's connection was cut under the client because
// the server answered without reading the body and closed: it answers every GET,
// HEAD and DELETE with "Connection: close" (connectionClose), and a body sent with
// one is never read. A client still writing that body when the close arrives has
// its connection reset or closed under it, while sending or while reading the
// answer (seen once, loaded: a 40 kB body on GET /sandbox/mail, "use of closed
// network connection"). Any other transport error is still the server's fault.
func unreadBodyCut(r fuzzRequest, err error) bool {
	if len(r.body) == 0 || (r.method != http.MethodGet && r.method != http.MethodHead && r.method != http.MethodDelete) {
		return false
	}
	return errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

func (f *fuzzer) send(r fuzzRequest) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.method, f.b.env.BaseURL+r.path, bytes.NewReader(r.body))
	if err != nil {
		return 0, "" // a path Go itself cannot send is not the server's concern
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(r.headers); i += 2 {
		req.Header.Set(r.headers[i], r.headers[i+1])
	}
	resp, err := f.client.Do(req)
	if err != nil && (len(r.body) > 256<<10 || unreadBodyCut(r, err)) {
		// The server may answer (a 401, a 404, a GET's reply) without reading a large
		// body and then close the connection: the client, still writing, sees a reset.
		// The service staying up is checked by the writes at the end.
		return 0, ""
	}
	if err != nil {
		return 0, fmt.Sprintf("%s %s: %v (body %s)", r.method, clip(r.path), err, clip(string(r.body)))
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, "" // a listen stream opened: it never ends, and its 200 is fine
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil && unreadBodyCut(r, err) {
		return resp.StatusCode, "" // the answer came; the close that followed it cut the read
	}
	if err != nil {
		return resp.StatusCode, fmt.Sprintf("%s %s: reading the answer: %v", r.method, clip(r.path), err)
	}
	where := fmt.Sprintf("%s %s (auth %s) body %s", r.method, clip(r.path), authName(r.headers), clip(string(r.body)))
	if resp.StatusCode >= 500 {
		return resp.StatusCode, fmt.Sprintf("%d from %s: %s", resp.StatusCode, where, clip(string(body)))
	}
	if resp.StatusCode >= 400 {
		var e struct {
			Type   *string `json:"type"`
			Detail *string `json:"detail"`
			Errors []struct {
				Code   *string         `json:"code"`
				Detail *string         `json:"detail"`
				Attr   json.RawMessage `json:"attr"`
			} `json:"errors"`
			RequestID *string `json:"request_id"`
		}
		if err := json.Unmarshal(body, &e); err != nil || e.Type == nil || e.Detail == nil || *e.Detail == "" || e.RequestID == nil ||
			len(e.Errors) != 1 || e.Errors[0].Code == nil || e.Errors[0].Detail == nil || len(e.Errors[0].Attr) == 0 {
			return resp.StatusCode, fmt.Sprintf("%d from %s is not the error shape: %s", resp.StatusCode, where, clip(string(body)))
		}
	}
	return resp.StatusCode, ""
}

func authName(h []string) string {
	for i := 0; i+1 < len(h); i += 2 {
		switch h[i] {
		case "Authorization":
			return "secret"
		case "X-SERVICE-PUBLIC-API-KEY":
			return "public header"
		}
	}
	return "body/none"
}

func clip(s string) string {
	if len(s) > 300 {
		return fmt.Sprintf("%q...(%d bytes)", s[:300], len(s))
	}
	return fmt.Sprintf("%q", s)
}
