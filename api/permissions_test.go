package api_test

import (
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	"paysvc/api"
	"paysvc/api/edge"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// forbidden checks a 403 that names the missing permission.
func forbidden(t *testing.T, r servicetest.Response, perm, what string) {
	t.Helper()
	if r.Status != 403 {
		t.Fatalf("%s: %d %s, want 403 naming %s", what, r.Status, r.Body, perm)
	}
	detail, code, _ := errorBody(t, r)
	if code != "permission_denied" || !strings.Contains(detail, " "+perm+" ") {
		t.Fatalf("%s: 403 %q (%s) does not name %s", what, detail, code, perm)
	}
}

// A view-only key reads what it may and is refused, naming the permission, every
// write that used to slip through (wallets, transfers, webhooks) and the payout
// writes; the merchant's full key still does everything.
func TestRestrictedKeyViewOnly(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) { c.API.WebhookAllowPrivate = true })
	b := newBundle(t, env, "Least Privilege")
	b.deposit(t, b.settlement, "1000")
	w := b.wallet(t, "KES", "ops")
	hook := b.post("/api/v1/webhooks/", map[string]any{"endpoint": "http://127.0.0.1:9/hook", "challenge": "super-secret-1",
		"collection_event": true})
	if hook.Status != 201 {
		t.Fatalf("full key creates a webhook: %d %s", hook.Status, hook.Body)
	}
	hookID := hook.Map(t)["id"].(string)
	file := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149"))
	if file.Status != 201 {
		t.Fatalf("full key initiates: %d %s", file.Status, file.Body)
	}
	f := file.Map(t)

	view := servicetest.Bearer(env.Key(b.merchant, "view_wallets", "view_files", "view_webhooks", "view_collections"))
	do := func(method, path string, body any) servicetest.Response { return env.Do(method, path, body, view...) }

	forbidden(t, do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "label": "sneaky"}), "add_wallets", "wallet create")
	forbidden(t, do("POST", "/api/v1/wallets/"+b.settlement+"/intra_transfer/",
		map[string]any{"wallet_id": w, "amount": "10", "narrative": "x"}), "add_transfers", "intra_transfer")
	forbidden(t, do("POST", "/api/v1/webhooks/", map[string]any{"endpoint": "http://127.0.0.1:9/steal", "challenge": "12345678",
		"collection_event": true}), "change_webhooks", "webhook create")
	forbidden(t, do("PATCH", "/api/v1/webhooks/"+hookID+"/", map[string]any{"endpoint": "http://127.0.0.1:9/steal"}),
		"change_webhooks", "webhook patch")
	forbidden(t, do("DELETE", "/api/v1/webhooks/"+hookID+"/", nil), "change_webhooks", "webhook delete")
	forbidden(t, do("POST", "/api/v1/send-money/initiation/", b2cFile("YES", "254708374149")), "add_files", "payout initiate")
	forbidden(t, do("POST", "/api/v1/send-money/approve/", map[string]any{"tracking_id": f["tracking_id"]}), "approve_files", "payout approve")
	forbidden(t, do("POST", "/api/v1/send-money/cancel/", map[string]any{"file_id": f["file_id"]}), "change_files", "payout cancel")
	forbidden(t, do("POST", "/api/v1/payment/collection/", map[string]any{"amount": "10", "currency": "KES", "method": "M-PESA",
		"phone_number": "254708374149"}), "add_collections", "collection")

	for _, path := range []string{"/api/v1/wallets/", "/api/v1/wallets/" + w + "/", "/api/v1/wallets/" + b.settlement + "/transactions/",
		"/api/v1/webhooks/", "/api/v1/webhooks/" + hookID + "/", "/api/v1/send-money/beneficiaries/frequently_used"} {
		if r := do("GET", path, nil); r.Status != 200 {
			t.Fatalf("view key reads %s: %d %s", path, r.Status, r.Body)
		}
	}
	if r := do("POST", "/api/v1/send-money/status/", map[string]any{"tracking_id": f["tracking_id"]}); r.Status != 200 {
		t.Fatalf("view key reads a file: %d %s", r.Status, r.Body)
	}
	// Nothing the refused requests asked for happened.
	if cur, _ := b.balance(t, w); cur != "0.00" {
		t.Fatalf("a refused transfer moved money: %s", cur)
	}
	if r := b.get("/api/v1/webhooks/" + hookID + "/"); r.Status != 200 || r.Map(t)["endpoint"] != "http://127.0.0.1:9/hook" {
		t.Fatalf("a refused patch or delete changed the webhook: %d %s", r.Status, r.Body)
	}

	// The full key still does everything.
	if r := b.transfer(b.settlement, w, "10.00"); r.Status != 200 {
		t.Fatalf("full key transfers: %d %s", r.Status, r.Body)
	}
	if r := b.post("/api/v1/send-money/approve/", map[string]any{"tracking_id": f["tracking_id"]}); r.Status != 200 {
		t.Fatalf("full key approves: %d %s", r.Status, r.Body)
	}
	if r := env.Do("PATCH", "/api/v1/webhooks/"+hookID+"/", map[string]any{"send_money_event": true}, servicetest.Bearer(b.secret)...); r.Status != 200 {
		t.Fatalf("full key patches a webhook: %d %s", r.Status, r.Body)
	}
	if r := env.Do("DELETE", "/api/v1/webhooks/"+hookID+"/", nil, servicetest.Bearer(b.secret)...); r.Status >= 300 {
		t.Fatalf("full key deletes a webhook: %d %s", r.Status, r.Body)
	}
	if r := b.post("/api/v1/send-money/initiation/", b2cFile("NO", "254708374149")); r.Status != 201 {
		t.Fatalf("full key initiates with requires_approval NO: %d %s", r.Status, r.Body)
	}
}

// Approval is its own right: add_files alone cannot approve, not even through
// requires_approval "NO" at initiation (that approves in the same command);
// change_files cancels but does not approve; approve_files approves.
func TestRestrictedKeyApproval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deposit(t, b.settlement, "1000")
	adder := servicetest.Bearer(b.env.Key(b.merchant, "add_files", "view_files"))
	for _, v := range []string{"NO", "no"} {
		forbidden(t, b.env.Do("POST", "/api/v1/send-money/initiate", b2cFile(v, "254708374149"), adder...), "approve_files",
			"initiation with requires_approval "+v)
	}
	r := b.env.Do("POST", "/api/v1/send-money/initiation/", b2cFile("YES", "254708374149"), adder...)
	if r.Status != 201 {
		t.Fatalf("add_files initiates a file awaiting approval: %d %s", r.Status, r.Body)
	}
	f := r.Map(t)
	forbidden(t, b.env.Do("POST", "/api/v1/send-money/approve/", map[string]any{"tracking_id": f["tracking_id"]}, adder...),
		"approve_files", "approve with add_files")
	changer := servicetest.Bearer(b.env.Key(b.merchant, "change_files"))
	forbidden(t, b.env.Do("POST", "/api/v1/send-money/approve/", map[string]any{"tracking_id": f["tracking_id"]}, changer...),
		"approve_files", "approve with change_files")
	approver := servicetest.Bearer(b.env.Key(b.merchant, "approve_files"))
	if r := b.env.Do("POST", "/api/v1/send-money/approve/", map[string]any{"tracking_id": f["tracking_id"]}, approver...); r.Status != 200 {
		t.Fatalf("approve_files approves: %d %s", r.Status, r.Body)
	}
	// Only the approved file holds money: the refused initiations created nothing.
	if _, avail := b.balance(t, b.settlement); avail == "1000.00" {
		t.Fatalf("the approved file holds nothing: %s", avail)
	}
	both := servicetest.Bearer(b.env.Key(b.merchant, "add_files", "approve_files"))
	if r := b.env.Do("POST", "/api/v1/send-money/initiation/", b2cFile("NO", "254708374149"), both...); r.Status != 201 {
		t.Fatalf("add_files with approve_files initiates approved: %d %s", r.Status, r.Body)
	}
	cancelFile := b.post("/api/v1/send-money/initiation/", b2cFile("YES", "254708374149")).Map(t)
	if r := b.env.Do("POST", "/api/v1/send-money/cancel/", map[string]any{"file_id": cancelFile["file_id"]}, changer...); r.Status != 200 {
		t.Fatalf("change_files cancels: %d %s", r.Status, r.Body)
	}
}

// Every route that accepts a secret key is walked from the router's own table: a key
// holding every permission but the route's one is refused with a 403 naming it, and
// sandbox tools refuse any restricted key. A route added later is covered the day
// it is added.
func TestEveryRouteEnforcesItsPermission(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var all []string
	for _, p := range edge.Permissions {
		all = append(all, p.Name)
	}
	keys := map[string][]string{}
	keyWithout := func(perm string) []string {
		if k, ok := keys[perm]; ok {
			return k
		}
		keys[perm] = servicetest.Bearer(b.env.Key(b.merchant, slices.DeleteFunc(slices.Clone(all), func(p string) bool { return p == perm })...))
		return keys[perm]
	}
	param := regexp.MustCompile(`:[a-z_]+`)
	routes := api.New(api.Config{}, api.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Routes()
	checked := 0
	for _, rt := range routes {
		path := param.ReplaceAllString(rt.Path, "ABCDEFGH23")
		var body any
		if rt.Method != "GET" && rt.Method != "DELETE" {
			body = map[string]any{}
		}
		switch {
		case rt.Permission != "":
			forbidden(t, b.env.Do(rt.Method, path, body, keyWithout(rt.Permission)...), rt.Permission, rt.Method+" "+rt.Path)
			checked++
		case strings.HasPrefix(rt.Access, "sandbox"):
			r := b.env.Do(rt.Method, path, body, keyWithout("")...)
			if r.Status != 403 {
				t.Fatalf("%s %s with a restricted key: %d %s", rt.Method, rt.Path, r.Status, r.Body)
			}
			checked++
		}
	}
	if checked < 30 {
		t.Fatalf("only %d routes checked", checked)
	}
}
