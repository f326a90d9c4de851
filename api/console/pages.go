package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"paysvc/actors/aggregates/refund"
	"paysvc/actors/values/money"
	"paysvc/api/edge"
	"paysvc/storage"
)

// The console's pages (console.go): each reads what it shows scoped by the
// session's merchant, and each form's action calls the API route that does it.

const consolePageSize = 50

// consoleFileRows is how many of a payment file's transactions its page lists.
const consoleFileRows = 200

// listPage is a keyset page: its rows and the address of the next page ("" at
// the end).
type listPage struct {
	Rows []map[string]any
	Next string
}

func decodeRow(raw []byte) map[string]any {
	m := map[string]any{}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	_ = d.Decode(&m) // our own stored JSON
	return m
}

// keysetPage turns storage rows into a page whose Next link keeps the query.
func keysetPage(c echo.Context, rows []storage.Row, more bool) listPage {
	return keysetPageOf(c, "after", rows, more)
}

// keysetPageOf is keysetPage for a page whose cursor is the query parameter param,
// so one address can page two lists (subscriptions and plans).
func keysetPageOf(c echo.Context, param string, rows []storage.Row, more bool) listPage {
	p := listPage{Rows: make([]map[string]any, len(rows))}
	for i, r := range rows {
		p.Rows[i] = decodeRow(r.Data)
	}
	if more && len(rows) > 0 {
		q := c.Request().URL.Query()
		q.Del("done")
		q.Set(param, storage.Cursor{At: rows[len(rows)-1].At, ID: rows[len(rows)-1].ID}.String())
		p.Next = c.Request().URL.Path + "?" + q.Encode()
	}
	return p
}

// cursorOf reads ?after=; a malformed one is the first page.
func cursorOf(c echo.Context) *storage.Cursor { return cursorParam(c, "after") }

func cursorParam(c echo.Context, param string) *storage.Cursor {
	if cur, ok := storage.ParseCursor(c.QueryParam(param)); ok {
		return &cur
	}
	return nil
}

// chart is the overview's 30 days of money in and out of one currency as bars,
// laid out here in whole pixels from whole cents, so the page needs no script.
type chart struct {
	Currency            string
	Width, Height, Base int
	Bars                []chartBar
	In, Out, Peak       string
	From, To            string
}

type chartBar struct {
	Day                     string
	X, InY, InH, OutX, OutH int
	OutY                    int
	In, Out                 string
}

// buildChart lays out one currency's flows (storage.WalletFlows of that currency).
func buildChart(currency string, flows []storage.DayFlow, from time.Time, days int) chart {
	const barW, gap, height = 9, 4, 160
	byDay := map[string]storage.DayFlow{}
	var peak int64
	in, out := money.Zero(), money.Zero()
	for _, f := range flows {
		byDay[f.Day.Format("2006-01-02")] = f
		in, out = in.Add(f.In), out.Add(f.Out)
		for _, a := range []money.Amount{f.In, f.Out} {
			if c, err := a.Cents(); err == nil && c > peak {
				peak = c
			}
		}
	}
	ch := chart{Currency: currency, Width: days * (2*barW + gap), Height: height + 20, Base: height, In: in.String(), Out: out.String(),
		Peak: money.FromUnits(peak).String()}
	scale := func(a money.Amount) int {
		c, err := a.Cents()
		if err != nil || peak == 0 || c <= 0 {
			return 0
		}
		return int(max(c*height/peak, 1))
	}
	for i := 0; i < days; i++ {
		d := from.AddDate(0, 0, i)
		key := d.Format("2006-01-02")
		f := byDay[key]
		if f.In.IsZero() && f.Out.IsZero() {
			f.In, f.Out = money.Zero(), money.Zero()
		}
		x := i * (2*barW + gap)
		ih, oh := scale(f.In), scale(f.Out)
		ch.Bars = append(ch.Bars, chartBar{Day: key, X: x, InY: height - ih, InH: ih, OutX: x + barW, OutY: height - oh, OutH: oh,
			In: f.In.String(), Out: f.Out.String()})
	}
	if len(ch.Bars) > 0 {
		ch.From, ch.To = ch.Bars[0].Day, ch.Bars[len(ch.Bars)-1].Day
	}
	return ch
}

// overviewDays is how many days the overview's charts cover, today included.
const overviewDays = 30

func (s *Console) consoleOverview(c echo.Context) error {
	cs := consoleOf(c)
	ctx := c.Request().Context()
	data := map[string]any{}
	if cs.may(edge.PermViewWallets) {
		rows, more, err := storage.ConsoleWallets(ctx, s.db, cs.principal.MerchantID, nil, consolePageSize)
		if err != nil {
			return err
		}
		data["Wallets"], data["MoreWallets"] = keysetPage(c, rows, false).Rows, more
		charts, err := s.overviewCharts(c, cs.principal.MerchantID)
		if err != nil {
			return err
		}
		data["Charts"] = charts
	}
	att, err := storage.ConsoleAttention(ctx, s.db, cs.principal.MerchantID, cs.may(edge.PermViewFiles), cs.may(edge.PermViewWebhooks),
		cs.may(edge.PermViewSubscriptions))
	if err != nil {
		return err
	}
	data["Attention"] = att
	return s.renderConsole(c, http.StatusOK, "overview", consoleView{Title: "Overview", Data: data})
}

// overviewCharts is one chart per currency the merchant holds a wallet in, of the
// last overviewDays Nairobi days: money in from outside and out to outside,
// transfers between its own wallets left out (storage.WalletFlows).
func (s *Console) overviewCharts(c echo.Context, merchantID string) ([]chart, error) {
	ctx := c.Request().Context()
	currencies, err := storage.MerchantCurrencies(ctx, s.db, merchantID)
	if err != nil {
		return nil, err
	}
	today := time.Now().In(nairobi)
	from := time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1-overviewDays)
	// from is the first day's date at UTC midnight; the day starts 3 hours earlier
	// in Nairobi (UTC+3, no daylight saving).
	flows, err := storage.WalletFlows(ctx, s.db, merchantID, from.Add(-3*time.Hour))
	if err != nil {
		return nil, err
	}
	byCurrency := map[string][]storage.DayFlow{}
	for _, f := range flows {
		byCurrency[f.Currency] = append(byCurrency[f.Currency], f)
	}
	charts := make([]chart, 0, len(currencies))
	for _, cur := range currencies {
		charts = append(charts, buildChart(cur, byCurrency[cur], from, overviewDays))
	}
	return charts, nil
}

func (s *Console) consoleWallets(c echo.Context) error {
	rows, more, err := storage.ConsoleWallets(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, cursorOf(c), consolePageSize)
	if err != nil {
		return err
	}
	return s.renderConsole(c, http.StatusOK, "wallets", consoleView{Title: "Wallets", Data: keysetPage(c, rows, more)})
}

func (s *Console) consoleWallet(c echo.Context) error {
	var w map[string]any
	r, err := s.consoleGet(c, "/api/v1/wallets/"+pathID(c, "wallet_id"), &w)
	if err != nil {
		return err
	}
	if r.Status >= 400 {
		return s.consoleProblem(c, r.Status, "Wallet", r.detail())
	}
	before, _ := strconv.ParseInt(c.QueryParam("before"), 10, 64)
	entries, more, err := storage.WalletStatement(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, c.Param("wallet_id"),
		max(before, 0), consolePageSize)
	if err != nil {
		return err
	}
	next := ""
	if more {
		next = c.Request().URL.Path + "?before=" + strconv.FormatInt(entries[len(entries)-1].EntryID, 10)
	}
	return s.renderConsole(c, http.StatusOK, "wallet", consoleView{Title: "Wallet statement",
		Data: map[string]any{"Wallet": w, "Entries": entries, "Next": next}})
}

// searchPhone is a search term as the stored phone form (2547XXXXXXXX), "" when it
// is not a phone number.
func searchPhone(q string) string {
	d := strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '+' {
			return -1
		}
		return r
	}, q)
	for _, r := range d {
		if r < '0' || r > '9' {
			return ""
		}
	}
	switch {
	case len(d) == 10 && d[0] == '0':
		return "254" + d[1:]
	case len(d) == 9 && (d[0] == '7' || d[0] == '1'):
		return "254" + d
	case len(d) == 12 && strings.HasPrefix(d, "254"):
		return d
	}
	return ""
}

// searchMax is how many bytes of a search term are looked up.
const searchMax = 200

// searchTerm is the search box's text cut to searchMax bytes at a character
// boundary: cut inside a character's bytes, the term is not UTF-8, which the
// database refuses (a 400 instead of the page). The edge has refused a query that
// was not UTF-8 text before the console sees it.
func searchTerm(raw string) string {
	q := strings.TrimSpace(raw)
	if len(q) > searchMax {
		n := searchMax
		for n > 0 && !utf8.RuneStart(q[n]) {
			n--
		}
		q = strings.TrimSpace(q[:n])
	}
	return q
}

func (s *Console) consoleCollections(c echo.Context) error {
	q := searchTerm(c.QueryParam("q"))
	rows, more, err := storage.ConsoleInvoices(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, q, searchPhone(q),
		cursorOf(c), consolePageSize)
	if err != nil {
		return err
	}
	return s.renderConsole(c, http.StatusOK, "collections", consoleView{Title: "Collections",
		Data: map[string]any{"Q": q, "Page": keysetPage(c, rows, more)}})
}

var fileStatuses = []string{"PREVIEW-AND-APPROVE", "PROCESSING", "COMPLETE", "CANCELLED", "FAILED"}

func (s *Console) consoleFiles(c echo.Context) error {
	status := c.QueryParam("status")
	if !slices.Contains(fileStatuses, status) {
		status = ""
	}
	rows, more, err := storage.ConsolePayoutFiles(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, status,
		cursorOf(c), consolePageSize)
	if err != nil {
		return err
	}
	return s.renderConsole(c, http.StatusOK, "files", consoleView{Title: "Payment files",
		Data: map[string]any{"Status": status, "Statuses": fileStatuses, "Page": keysetPage(c, rows, more)}})
}

// consoleFile shows one payment file as the API's status answers it: every
// transaction with its amount and charge, and the totals, before approval.
func (s *Console) consoleFile(c echo.Context) error {
	r, err := s.consoleCall(c, http.MethodPost, "/api/v1/send-money/status", map[string]string{"file_id": c.Param("file_id")}, "")
	if err != nil {
		return err
	}
	if r.Status >= 400 {
		return s.consoleProblem(c, r.Status, "Payment file", r.detail())
	}
	f := decodeRow(r.Body)
	// What an operator did to the file (paysvc payout hold|release|fail) is not in
	// the status answer (the spec's shape): the page reads it from the file.
	if op, err := storage.PayoutFileOperator(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, c.Param("file_id")); err == nil {
		f["operator"] = op
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	// A file holds up to 10,000 transactions: the page lists the first ones; the
	// totals above them cover the whole file.
	if txns, ok := f["transactions"].([]any); ok && len(txns) > consoleFileRows {
		f["transactions"], f["more_transactions"] = txns[:consoleFileRows], len(txns)-consoleFileRows
	}
	return s.renderConsole(c, http.StatusOK, "file", consoleView{Title: "Payment file " + c.Param("file_id"), Data: f})
}

func (s *Console) consoleFileAction(action string) echo.HandlerFunc {
	done := map[string]string{"approve": "approved", "cancel": "file-cancelled"}[action]
	return func(c echo.Context) error {
		id := c.Param("file_id")
		return s.consoleAct(c, http.MethodPost, "/api/v1/send-money/"+action, map[string]string{"file_id": id},
			"/console/payment-files/"+url.PathEscape(id), done)
	}
}

func (s *Console) consoleRefunds(c echo.Context) error {
	rows, more, err := storage.ConsoleRefunds(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, cursorOf(c), consolePageSize)
	if err != nil {
		return err
	}
	return s.renderConsole(c, http.StatusOK, "refunds", consoleView{Title: "Refunds", Data: keysetPage(c, rows, more)})
}

// consoleRefundForm asks for a refund of one collection, showing the collection
// (read as the collections page does, scoped by the merchant) only to a key that
// may read collections: the collection names its payer (phone, email), which
// add_refunds alone does not grant (docs/security.md, "Console sessions").
func (s *Console) consoleRefundForm(c echo.Context) error {
	inv := searchTerm(c.QueryParam("invoice"))
	var invoice map[string]any
	if inv != "" && len(inv) <= 40 && consoleOf(c).may(edge.PermViewCollections) {
		rows, _, err := storage.ConsoleInvoices(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, inv, "", nil, 1)
		if err != nil {
			return err
		}
		// The search also matches references and emails: only the invoice itself.
		if len(rows) == 1 && rows[0].ID == inv {
			invoice = decodeRow(rows[0].Data)
		}
	}
	return s.renderConsole(c, http.StatusOK, "refund_new", consoleView{Title: "Refund a collection",
		Data: map[string]any{"Invoice": invoice, "InvoiceID": inv, "Reasons": refund.Reasons}})
}

func (s *Console) consoleCreateRefund(c echo.Context) error {
	body := map[string]string{"invoice": c.FormValue("invoice"), "amount": strings.TrimSpace(c.FormValue("amount")),
		"reason": c.FormValue("reason"), "reason_details": c.FormValue("reason_details")}
	return s.consoleAct(c, http.MethodPost, "/api/v1/chargebacks", body, "/console/refunds", "refund-created")
}

func (s *Console) consoleCancelRefund(c echo.Context) error {
	return s.consoleAct(c, http.MethodPost, "/api/v1/chargebacks/"+pathID(c, "refund_id")+"/cancel", map[string]string{},
		"/console/refunds", "refund-cancelled")
}

var subscriptionStatuses = []string{"PENDING", "ACTIVE", "FAILED", "COMPLETE", "CANCELED"}

func (s *Console) consoleSubscriptions(c echo.Context) error {
	status := c.QueryParam("status")
	if !slices.Contains(subscriptionStatuses, status) {
		status = ""
	}
	rows, more, err := storage.ConsoleSubscriptions(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, status,
		cursorOf(c), consolePageSize)
	if err != nil {
		return err
	}
	planRows, morePlans, err := storage.ConsolePlans(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID,
		cursorParam(c, "plans_after"), consolePageSize)
	if err != nil {
		return err
	}
	plans := keysetPageOf(c, "plans_after", planRows, morePlans)
	for _, p := range plans.Rows {
		if id, ok := p["plan_id"].(string); ok {
			p["plan_url"] = s.planURL(id)
		}
	}
	return s.renderConsole(c, http.StatusOK, "subscriptions", consoleView{Title: "Subscriptions",
		Data: map[string]any{"Status": status, "Statuses": subscriptionStatuses, "Page": keysetPage(c, rows, more), "Plans": plans}})
}

func (s *Console) consoleCancelSubscription(c echo.Context) error {
	return s.consoleAct(c, http.MethodPost, "/api/v1/subscriptions/subscriptions/"+pathID(c, "subscription_id")+"/unsubscribe",
		map[string]string{}, "/console/subscriptions", "sub-cancelled")
}

func (s *Console) consoleLinks(c echo.Context) error {
	rows, more, err := storage.ConsolePaymentLinks(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, cursorOf(c),
		consolePageSize)
	if err != nil {
		return err
	}
	links := keysetPage(c, rows, more)
	for _, l := range links.Rows {
		if id, ok := l["id"].(string); ok {
			l["url"] = s.linkURL(id)
		}
	}
	return s.renderConsole(c, http.StatusOK, "links", consoleView{Title: "Payment links", Data: links})
}

func (s *Console) consoleCreateLink(c echo.Context) error {
	body := map[string]any{"title": strings.TrimSpace(c.FormValue("title")), "currency": c.FormValue("currency")}
	if a := strings.TrimSpace(c.FormValue("amount")); a != "" {
		body["amount"] = a
	}
	return s.consoleAct(c, http.MethodPost, "/api/v1/paymentlinks", body, "/console/payment-links", "link-created")
}

func (s *Console) consoleDeactivateLink(c echo.Context) error {
	return s.consoleAct(c, http.MethodPost, "/api/v1/paymentlinks/"+pathID(c, "link_id")+"/deactivate", map[string]string{},
		"/console/payment-links", "link-deactivated")
}

func (s *Console) consoleWebhooks(c echo.Context) error {
	// A merchant has a handful of endpoints: the API's first page holds them all.
	var hooks struct {
		Results []map[string]any `json:"results"`
	}
	r, err := s.consoleGet(c, "/api/v1/webhooks?page_size=50", &hooks)
	if err != nil {
		return err
	}
	if r.Status >= 400 {
		return s.consoleProblem(c, r.Status, "Not available", r.detail())
	}
	rows, more, err := storage.ConsoleDeliveries(c.Request().Context(), s.db, consoleOf(c).principal.MerchantID, cursorOf(c),
		consolePageSize)
	if err != nil {
		return err
	}
	return s.renderConsole(c, http.StatusOK, "webhooks", consoleView{Title: "Webhooks",
		Data: map[string]any{"Webhooks": hooks.Results, "Deliveries": keysetPage(c, rows, more)}})
}

// consoleWebhookEvent shows one event: its deliveries (one per webhook) and every
// attempt, replays included, with the status code each endpoint answered.
func (s *Console) consoleWebhookEvent(c echo.Context) error {
	ctx := c.Request().Context()
	merchant := consoleOf(c).principal.MerchantID
	id := c.Param("event_id")
	ds, err := storage.EventDeliveries(ctx, s.db, merchant, id)
	if err != nil {
		return err
	}
	if len(ds) == 0 {
		return s.consoleProblem(c, http.StatusNotFound, "Event", "Event not found.")
	}
	atts, err := storage.EventAttempts(ctx, s.db, merchant, id, 200)
	if err != nil {
		return err
	}
	type delivery struct {
		WebhookID, Endpoint, Topic, Status string
		Attempts                           int
		LastStatus                         *int
		Body                               string
	}
	var out []delivery
	for _, d := range ds {
		out = append(out, delivery{WebhookID: d.WebhookID, Endpoint: d.Endpoint, Topic: d.Topic, Status: d.Status, Attempts: d.Attempts,
			LastStatus: d.LastStatus, Body: string(d.Body)})
	}
	return s.renderConsole(c, http.StatusOK, "event", consoleView{Title: "Event " + id,
		Data: map[string]any{"ID": id, "Deliveries": out, "Attempts": atts}})
}

func (s *Console) consoleReplay(c echo.Context) error {
	id := c.Param("event_id")
	return s.consoleAct(c, http.MethodPost, "/api/v1/webhooks/events/"+url.PathEscape(id)+"/replay", map[string]string{},
		"/console/webhooks/events/"+url.PathEscape(id), "replayed")
}

// consoleRotateSecret rotates a webhook's signing secret and shows the new one, once,
// with how long the old one keeps signing (the form's expire_previous_in; the API's
// default without one, and its words when the value is refused).
func (s *Console) consoleRotateSecret(c echo.Context) error {
	body := map[string]string{}
	if v := c.FormValue("expire_previous_in"); v != "" {
		body["expire_previous_in"] = v
	}
	r, err := s.consoleCall(c, http.MethodPost, "/api/v1/webhooks/"+pathID(c, "webhook_id")+"/rotate-secret", body, "")
	if err != nil {
		return err
	}
	if r.Status >= 400 {
		return s.consoleProblem(c, r.Status, "Not done", r.detail())
	}
	return s.renderConsole(c, http.StatusOK, "secret", consoleView{Title: "New signing secret", Data: decodeRow(r.Body)})
}

// consoleKeys lists the merchant's keys. Only the unrestricted key reaches it: a
// key that could make keys could give itself any permission.
func (s *Console) consoleKeys(c echo.Context) error {
	return s.renderKeys(c, http.StatusOK, "", nil, "")
}

// keyFormPurpose names the one-time tokens of the new-key form.
const keyFormPurpose = "create-key"

func (s *Console) renderKeys(c echo.Context, status int, newSecret string, newPerms []string, problem string) error {
	cs := consoleOf(c)
	keys, err := storage.MerchantKeys(c.Request().Context(), s.db, cs.principal.MerchantID)
	if err != nil {
		return err
	}
	return s.renderConsole(c, status, "keys", consoleView{Title: "API keys", Data: map[string]any{"Keys": keys,
		"Permissions": edge.Permissions, "NewSecret": newSecret, "NewPermissions": newPerms, "Problem": problem,
		"Once": formOnce(cs, keyFormPurpose)}})
}

// consoleCreateKey issues a restricted secret key with the ticked permissions and
// shows it once; only its hash is stored (as `paysvc key create`). The form must
// carry its one-time token (a second submit of the same form creates nothing and
// says which key the first made) and the signed-in key typed again
// (consoleReauth).
func (s *Console) consoleCreateKey(c echo.Context) error {
	form, err := c.FormParams()
	if err != nil {
		return s.consoleProblem(c, http.StatusBadRequest, "Not done", "The form could not be read.")
	}
	cs := consoleOf(c)
	once := checkOnce(cs, keyFormPurpose, form.Get("once"))
	if once == nil {
		return s.renderKeys(c, http.StatusBadRequest, "", nil, "This form is out of date. Fill it in again below. No key was created.")
	}
	var perms []string
	for _, p := range form["permission"] {
		if !edge.KnownPermission(p) {
			return s.consoleProblem(c, http.StatusBadRequest, "Not done", "Unknown permission.")
		}
		if !slices.Contains(perms, p) {
			perms = append(perms, p)
		}
	}
	if len(perms) == 0 {
		return s.renderKeys(c, http.StatusBadRequest, "", nil, "Tick at least one permission: a key without any could do nothing.")
	}
	if e := s.consoleReauth(c, cs); e != nil {
		if e.Status >= 500 {
			return e
		}
		return s.renderKeys(c, e.Status, "", nil, e.Detail)
	}
	key, id := edge.NewKey("secret", s.cfg.Environment)
	made, created, err := storage.InsertKeyOnce(c.Request().Context(), s.db, once, storage.APIKey{KeyID: id,
		MerchantID: cs.principal.MerchantID, Kind: "secret", Environment: s.cfg.Environment, Permissions: perms, Unrestricted: false}, sha256Of(key))
	if err != nil {
		return err
	}
	if !created {
		msg := "This form was already submitted. No second key was created."
		if made != "" {
			msg = "This form was already submitted and created key " + made + ". No second key was created; its secret was shown once, after the first submit."
		}
		return s.renderKeys(c, http.StatusConflict, "", nil, msg)
	}
	return s.renderKeys(c, http.StatusCreated, key, perms, "")
}

func (s *Console) consoleRevokeKey(c echo.Context) error {
	cs := consoleOf(c)
	id := c.Param("key_id")
	if id == cs.principal.KeyID {
		return s.renderKeys(c, http.StatusConflict, "", nil, "This is the key you are signed in with: sign in with another key to revoke it.")
	}
	ok, err := storage.RevokeMerchantKey(c.Request().Context(), s.db, cs.principal.MerchantID, id)
	if err != nil {
		return err
	}
	if !ok {
		return s.consoleProblem(c, http.StatusNotFound, "Not found", "No such active key.")
	}
	s.forgetKey(id)
	return c.Redirect(http.StatusSeeOther, "/console/keys?done=key-revoked")
}

func (s *Console) consoleMailbox(c echo.Context) error {
	var list struct {
		Results []map[string]any `json:"results"`
	}
	r, err := s.consoleGet(c, "/api/v1/sandbox/mail", &list)
	if err != nil {
		return err
	}
	if r.Status >= 400 {
		return s.consoleProblem(c, r.Status, "Not available", r.detail())
	}
	slices.Reverse(list.Results) // newest first
	return s.renderConsole(c, http.StatusOK, "mailbox", consoleView{Title: "Mailbox", Data: list.Results})
}

func (s *Console) consoleTestClocks(c echo.Context) error {
	data := map[string]any{"ClockID": c.QueryParam("clock")}
	if id := c.QueryParam("clock"); id != "" {
		var clock map[string]any
		r, err := s.consoleGet(c, "/api/v1/subscriptions/test_clocks/"+url.PathEscape(id), &clock)
		if err != nil {
			return err
		}
		if r.Status >= 400 {
			return s.consoleProblem(c, r.Status, "Test clock", r.detail())
		}
		data["Clock"] = clock
	}
	return s.renderConsole(c, http.StatusOK, "clocks", consoleView{Title: "Test clocks", Data: data})
}

// frozenTime reads a datetime-local field (Nairobi time) as RFC 3339.
func frozenTime(v string) string {
	t, err := time.ParseInLocation("2006-01-02T15:04", v, nairobi)
	if err != nil {
		return v // the API names the field and the format
	}
	return t.Format(time.RFC3339)
}

func (s *Console) consoleCreateTestClock(c echo.Context) error {
	r, err := s.consoleCall(c, http.MethodPost, "/api/v1/subscriptions/test_clocks",
		map[string]string{"name": c.FormValue("name"), "frozen_time": frozenTime(c.FormValue("frozen_time"))}, "")
	if err != nil {
		return err
	}
	if r.Status >= 400 {
		return s.consoleProblem(c, r.Status, "Not done", r.detail())
	}
	var clock struct {
		ID string `json:"test_clock_id"`
	}
	if err := json.Unmarshal(r.Body, &clock); err != nil || clock.ID == "" {
		return errors.Join(edge.ErrInternal, err)
	}
	return c.Redirect(http.StatusSeeOther, "/console/test-clocks?clock="+url.QueryEscape(clock.ID)+"&done=clock-created")
}

func (s *Console) consoleAdvanceTestClock(c echo.Context) error {
	id := c.Param("clock_id")
	return s.consoleAct(c, http.MethodPost, "/api/v1/subscriptions/test_clocks/"+url.PathEscape(id)+"/advance",
		map[string]string{"frozen_time": frozenTime(c.FormValue("frozen_time"))}, "/console/test-clocks?clock="+url.QueryEscape(id),
		"clock-advanced")
}
