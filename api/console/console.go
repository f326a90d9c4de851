package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"paysvc/actors/values/ids"
	"paysvc/api/edge"
)

// Config is the console's part of the service configuration.
type Config struct {
	Environment string // sandbox or live
	// PublicBaseURL is the root browsers reach paysvc at: an https one makes the
	// session cookie Secure and __Host- (consoleHTTPS).
	PublicBaseURL string
	// Idle and MaxAge end a session after that long without a request, and that
	// long after sign-in whatever happens.
	Idle, MaxAge time.Duration
}

// Deps are what the console is given by the server that mounts it. Everything it
// does to money, and every read the API also answers, goes through API.
type Deps struct {
	DB *sqlx.DB
	// API is the JSON API's handler: each console action is a request to it, made
	// in-process with the session's principal (edge.WithCaller).
	API http.Handler
	// Verify checks a secret key exactly as the API checks a Bearer key
	// (environment, revocation, merchant enabled).
	Verify func(ctx context.Context, key string) (*edge.Principal, *edge.Error)
	// ForgetKey drops the API's cached lookups of a key the console revoked, so the
	// revocation takes effect in this process at once.
	ForgetKey func(keyID string)
	// Asset is the address of a stylesheet or icon under /static/.
	Asset func(name string) (string, error)
	// PlanURL and LinkURL are the customer pages of a plan and a payment link.
	PlanURL, LinkURL func(id string) string
}

// Console is the merchant console (docs/console.md): server-rendered pages at
// /console/ for a merchant signed in with a secret key (session.go). It has no
// money path of its own: every action is a call of the API's own route with the
// session's principal (consoleCall), so the permission check, Idempotency-Key, command
// and reply are the API's. Pages read what they list straight from storage,
// scoped by the session's merchant, after the console checks the permission the
// matching API read needs. The pages need no script: plain forms, one stylesheet
// from /static/, and a CSP that allows no script at all (consoleCSP).
type Console struct {
	cfg       Config
	db        *sqlx.DB
	api       http.Handler
	verify    func(ctx context.Context, key string) (*edge.Principal, *edge.Error)
	forgetKey func(keyID string)
	planURL   func(id string) string
	linkURL   func(id string) string
	templates map[string]*template.Template
}

// New builds the console; Routes registers it.
func New(cfg Config, d Deps) *Console {
	return &Console{cfg: cfg, db: d.DB, api: d.API, verify: d.Verify, forgetKey: d.ForgetKey, planURL: d.PlanURL,
		linkURL: d.LinkURL, templates: loadTemplates(d.Asset)}
}

//go:embed *.html
var files embed.FS

func loadTemplates(asset func(string) (string, error)) map[string]*template.Template {
	funcs := template.FuncMap{
		"asset": asset,
		// idem is a fresh Idempotency-Key for one rendered form: submitting the same
		// form twice (a double click, a resubmitted POST) repeats one API request.
		"idem": ids.UUID,
		"when": consoleTime,
		"str":  func(v any) string { s, _ := v.(string); return s },
	}
	return edge.ParseWithLayout(files, funcs)
}

// nairobi is the console's clock: the merchants' and the ledger's day.
var nairobi = func() *time.Location {
	l, err := time.LoadLocation("Africa/Nairobi")
	if err != nil {
		return time.FixedZone("EAT", 3*3600)
	}
	return l
}()

// consoleTime shows a time (a time.Time or an RFC 3339 string from the API) in
// Nairobi time, to the minute.
func consoleTime(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case string:
		p, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return x
		}
		t = p
	default:
		return ""
	}
	if t.IsZero() {
		return ""
	}
	return t.In(nairobi).Format("2006-01-02 15:04")
}

// Page needs beyond one permission.
const (
	needNothing = ""
	needFull    = "full"    // the merchant's unrestricted key (API keys; sandbox tooling)
	needSandbox = "sandbox" // prefix: exists only on a sandbox server
)

// navItem is one section of the console with what it needs.
type navItem struct {
	Path, Label, Need string
	Sandbox           bool
	Current           bool
}

var consoleNav = []navItem{
	{Path: "/console", Label: "Overview"},
	{Path: "/console/wallets", Label: "Wallets", Need: edge.PermViewWallets},
	{Path: "/console/collections", Label: "Collections", Need: edge.PermViewCollections},
	{Path: "/console/payment-files", Label: "Payment files", Need: edge.PermViewFiles},
	{Path: "/console/refunds", Label: "Refunds", Need: edge.PermViewRefunds},
	{Path: "/console/subscriptions", Label: "Subscriptions", Need: edge.PermViewSubscriptions},
	{Path: "/console/payment-links", Label: "Payment links", Need: edge.PermViewCollections},
	{Path: "/console/webhooks", Label: "Webhooks", Need: edge.PermViewWebhooks},
	{Path: "/console/keys", Label: "API keys", Need: needFull},
	{Path: "/console/mailbox", Label: "Mailbox", Need: needFull, Sandbox: true},
	{Path: "/console/test-clocks", Label: "Test clocks", Need: edge.PermViewSubscriptions, Sandbox: true},
}

// may reports whether the session may use something needing need.
func (cs *consoleSession) may(need string) bool {
	switch need {
	case needNothing:
		return true
	case needFull:
		return cs.full()
	}
	return cs.principal.Can(need)
}

// consoleView is what every console page's layout shows.
type consoleView struct {
	Title    string
	Merchant string
	Sandbox  bool
	KeyID    string
	Full     bool
	Nav      []navItem
	CSRF     string
	Can      map[string]bool // permission name -> held, for the page's buttons
	Notice   string          // the outcome of the action that led here
	Data     any
}

// renderConsole writes a console page, rendered into a buffer first so a template
// error is the generic 500, never half a page.
func (s *Console) renderConsole(c echo.Context, status int, name string, v consoleView) error {
	t, ok := s.templates[name]
	if !ok {
		return edge.ErrInternal
	}
	v.Sandbox = s.cfg.Environment == "sandbox"
	if cs := consoleOf(c); cs != nil {
		v.Merchant, v.KeyID, v.Full, v.CSRF = cs.merchant, cs.principal.KeyID, cs.full(), cs.csrf
		v.Can = map[string]bool{}
		for _, p := range edge.Permissions {
			v.Can[p.Name] = cs.principal.Can(p.Name)
		}
		here := c.Request().URL.Path
		for _, n := range consoleNav {
			if (n.Sandbox && !v.Sandbox) || !cs.may(n.Need) {
				continue // a section the key may not use is not offered
			}
			n.Current = here == n.Path || (n.Path != consoleHome && strings.HasPrefix(here, n.Path+"/"))
			v.Nav = append(v.Nav, n)
		}
	}
	if v.Notice == "" {
		v.Notice = consoleNotices[c.QueryParam("done")]
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", v); err != nil {
		return err
	}
	consoleHeaders(c.Response().Header())
	return c.HTMLBlob(status, buf.Bytes())
}

// consoleHeaders are the hosted pages' security headers with three changes. The
// policy allows no script (consoleCSP). Referrer
// same-origin instead of none: under no-referrer a browser sends "Origin: null" with
// a form, and the console's forms must name their origin (sameOrigin); console
// addresses hold only ids, and other sites still get no referrer. And no-store:
// secrets shown once, balances and form tokens must not be cached.
func consoleHeaders(h http.Header) {
	edge.PageHeaders(h)
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// consoleCSP is the hosted pages' policy without script: the console's pages are
// plain forms and links (the charts are laid out on the server), so no script may
// run on them at all, not even one of paysvc's own files. A console page holds
// payers' data and forms that move money; an injection that got past the
// templates' escaping would find nothing to execute. Images are the QR codes and
// the icon; no connect-src: the pages fetch nothing.
const consoleCSP = "default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// consoleNotices are the outcomes a redirect after an action names (?done=): a fixed
// set, so the address cannot put words on the page.
var consoleNotices = map[string]string{
	"approved":         "Payment file approved. It is being paid.",
	"file-cancelled":   "Payment file cancelled.",
	"refund-created":   "Refund requested.",
	"refund-cancelled": "Refund cancelled.",
	"sub-cancelled":    "Subscription cancelled.",
	"link-created":     "Payment link created.",
	"link-deactivated": "Payment link deactivated.",
	"replayed":         "Event replayed: the new attempt is listed below.",
	"key-revoked":      "Key revoked. Its sessions have ended.",
	"clock-created":    "Test clock created.",
	"clock-advanced":   "Test clock advanced.",
}

// consoleProblem renders an error page for a refusal: the API's own message (never
// an internal error's text: the API's answers carry none) or the console's.
func (s *Console) consoleProblem(c echo.Context, status int, title, detail string) error {
	return s.renderConsole(c, status, "problem", consoleView{Title: title, Data: map[string]string{"Detail": detail}})
}

// consoleNeeds wraps a console handler with its page's need: a section the key may
// not use is refused (403) as the API would refuse its routes; a sandbox-only
// section does not exist on a live server (404).
func (s *Console) consoleNeeds(need string, sandboxOnly bool, h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if sandboxOnly && s.cfg.Environment != "sandbox" {
			return s.consoleProblem(c, http.StatusNotFound, "Not found", "This page exists only on a sandbox server.")
		}
		if !consoleOf(c).may(need) {
			detail := "This API key does not have the " + need + " permission, which this page needs."
			if need == needFull {
				detail = "This page needs the merchant's unrestricted secret key; this API key is restricted."
			}
			return s.consoleProblem(c, http.StatusForbidden, "Not allowed", detail)
		}
		return h(c)
	}
}

// Routes registers the console's pages and forms through add, the mounting
// server's route table, so every console route declares its access like the
// API's: session is false for the sign-in page and form, which are open, and true
// for every other route, which needs a session (Authenticate).
func (s *Console) Routes(add func(method, path string, h echo.HandlerFunc, session bool)) {
	const GET, POST = http.MethodGet, http.MethodPost
	cr := func(method, p string, h echo.HandlerFunc, need string) {
		sandboxOnly := strings.HasPrefix(need, needSandbox+":")
		need = strings.TrimPrefix(need, needSandbox+":")
		add(method, p, s.consoleNeeds(need, sandboxOnly, h), true)
	}
	add(GET, consoleSignInPath, s.consoleSignInPage, false)
	add(POST, consoleSignInPath, s.consoleSignIn, false)
	cr(POST, "/console/sign-out", s.consoleSignOut, needNothing)
	cr(GET, consoleHome, s.consoleOverview, needNothing)
	cr(GET, "/console/wallets", s.consoleWallets, edge.PermViewWallets)
	cr(GET, "/console/wallets/:wallet_id", s.consoleWallet, edge.PermViewWallets)
	cr(GET, "/console/collections", s.consoleCollections, edge.PermViewCollections)
	cr(GET, "/console/payment-files", s.consoleFiles, edge.PermViewFiles)
	cr(GET, "/console/payment-files/:file_id", s.consoleFile, edge.PermViewFiles)
	cr(POST, "/console/payment-files/:file_id/approve", s.consoleFileAction("approve"), edge.PermApproveFiles)
	cr(POST, "/console/payment-files/:file_id/cancel", s.consoleFileAction("cancel"), edge.PermChangeFiles)
	cr(GET, "/console/refunds", s.consoleRefunds, edge.PermViewRefunds)
	cr(GET, "/console/refunds/new", s.consoleRefundForm, edge.PermAddRefunds)
	cr(POST, "/console/refunds", s.consoleCreateRefund, edge.PermAddRefunds)
	cr(POST, "/console/refunds/:refund_id/cancel", s.consoleCancelRefund, edge.PermAddRefunds)
	cr(GET, "/console/subscriptions", s.consoleSubscriptions, edge.PermViewSubscriptions)
	cr(POST, "/console/subscriptions/:subscription_id/cancel", s.consoleCancelSubscription, edge.PermChangeSubscriptions)
	cr(GET, "/console/payment-links", s.consoleLinks, edge.PermViewCollections)
	cr(POST, "/console/payment-links", s.consoleCreateLink, edge.PermAddCollections)
	cr(POST, "/console/payment-links/:link_id/deactivate", s.consoleDeactivateLink, edge.PermAddCollections)
	cr(GET, "/console/webhooks", s.consoleWebhooks, edge.PermViewWebhooks)
	cr(GET, "/console/webhooks/events/:event_id", s.consoleWebhookEvent, edge.PermViewWebhooks)
	cr(POST, "/console/webhooks/events/:event_id/replay", s.consoleReplay, edge.PermChangeWebhooks)
	cr(POST, "/console/webhooks/:webhook_id/rotate-secret", s.consoleRotateSecret, edge.PermChangeWebhooks)
	cr(GET, "/console/keys", s.consoleKeys, needFull)
	cr(POST, "/console/keys", s.consoleCreateKey, needFull)
	cr(POST, "/console/keys/:key_id/revoke", s.consoleRevokeKey, needFull)
	cr(GET, "/console/mailbox", s.consoleMailbox, needSandbox+":"+needFull)
	cr(GET, "/console/test-clocks", s.consoleTestClocks, needSandbox+":"+edge.PermViewSubscriptions)
	cr(POST, "/console/test-clocks", s.consoleCreateTestClock, needSandbox+":"+edge.PermChangeSubscriptions)
	cr(POST, "/console/test-clocks/:clock_id/advance", s.consoleAdvanceTestClock, needSandbox+":"+edge.PermChangeSubscriptions)
}

// replyRecorder keeps the answer of an API route the console called.
type replyRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *replyRecorder) Header() http.Header { return r.header }
func (r *replyRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}
func (r *replyRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// apiReply is an API route's answer to the console.
type apiReply struct {
	Status int
	Body   []byte
}

// detail is the API's message of a refusal.
func (r apiReply) detail() string {
	var e struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(r.Body, &e) != nil || e.Detail == "" {
		return "The request failed."
	}
	return e.Detail
}

// consoleCall runs an API route for the console's session: the whole route chain
// (rate limits, the permission check, Idempotency-Key, the handler and so the
// engine's command and its reply) with the session's principal in place of a
// Bearer key. idem is the form's Idempotency-Key ("" for reads).
func (s *Console) consoleCall(c echo.Context, method, target string, body any, idem string) (apiReply, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return apiReply{}, err
		}
	}
	outer := c.Request()
	ctx := edge.WithCaller(outer.Context(), consoleOf(c).principal)
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(raw))
	if err != nil {
		return apiReply{}, err
	}
	req.RemoteAddr = outer.RemoteAddr // the same client for the address limits
	if xff := outer.Header.Get("X-Forwarded-For"); xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	req.Header.Set("X-Request-Id", edge.RequestID(c))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	rec := &replyRecorder{header: http.Header{}}
	s.api.ServeHTTP(rec, req)
	return apiReply{Status: rec.status, Body: rec.body.Bytes()}, nil
}

// consoleGet calls an API read and decodes its JSON answer into out; a refusal is
// returned as the reply (status >= 400) for the page to show.
func (s *Console) consoleGet(c echo.Context, target string, out any) (apiReply, error) {
	r, err := s.consoleCall(c, http.MethodGet, target, nil, "")
	if err != nil || r.Status >= 400 {
		return r, err
	}
	d := json.NewDecoder(bytes.NewReader(r.Body))
	d.UseNumber()
	return r, d.Decode(out)
}

// consoleAct runs an API action from a form and answers as a form should: on
// success, a redirect (303) to next with the outcome's notice; on refusal, the
// API's message on an error page with the API's status.
func (s *Console) consoleAct(c echo.Context, method, target string, body any, next, done string) error {
	r, err := s.consoleCall(c, method, target, body, formIdem(c))
	if err != nil {
		return err
	}
	if r.Status >= 400 {
		return s.consoleProblem(c, r.Status, "Not done", r.detail())
	}
	sep := "?"
	if strings.Contains(next, "?") {
		sep = "&"
	}
	return c.Redirect(http.StatusSeeOther, next+sep+"done="+url.QueryEscape(done))
}

// formIdem is the form's Idempotency-Key, or a fresh one if it sent none usable.
func formIdem(c echo.Context) string {
	v := c.FormValue("idem")
	if v == "" || len(v) > 64 {
		return ids.UUID()
	}
	return v
}

// pathID is a path parameter as a URL path segment of an API call.
func pathID(c echo.Context, name string) string { return url.PathEscape(c.Param(name)) }
