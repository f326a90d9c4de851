package openapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// The builder's own reports: a served route with no entry is still described (from
// the route table, marked incomplete) and reported; an entry whose route is not
// served is reported. The api package's tests fail on any report, so these are what
// make a forgotten or stale entry visible.
func TestBuildReportsMissingAndStaleEntries(t *testing.T) {
	t.Parallel()
	routes := []Route{
		{Method: "GET", Path: "/api/v1/wallets", Auth: AuthSecret, Permission: "view_wallets"},
		{Method: "POST", Path: "/api/v1/brand-new/:thing_id", Auth: AuthSecret, Permission: "add_things", Idempotent: true},
	}
	d, err := Build(routes, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(d.Problems, "\n")
	for _, want := range []string{
		"route POST /api/v1/brand-new/:thing_id is served but has no entry",
		`path parameter "thing_id"`,
		"createWallet lists POST /api/v1/wallets, which the router does not serve",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(d.JSON, &doc); err != nil {
		t.Fatal(err)
	}
	var op map[string]any
	if err := json.Unmarshal(doc.Paths["/api/v1/brand-new/{thing_id}"]["post"], &op); err != nil {
		t.Fatal(err)
	}
	// Described from the route table all the same: who may call it, its permission,
	// its Idempotency-Key and the errors those imply.
	if op["x-paysvc-incomplete"] != true || op["x-paysvc-permission"] != "add_things" || op["x-paysvc-auth"] != string(AuthSecret) {
		t.Errorf("the undocumented route's operation: %v", op)
	}
	responses, _ := op["responses"].(map[string]any)
	for _, s := range []string{"401", "403", "404", "409", "413", "422", "429"} {
		if responses[s] == nil {
			t.Errorf("the undocumented route's operation lacks the derived %s", s)
		}
	}
	if d.Operations != 2 {
		t.Errorf("%d operations, want 2", d.Operations)
	}
}

// errorStatuses follows the route's declaration.
func TestErrorStatusesFollowTheDeclaration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		r    Route
		spec opSpec
		want string
	}{
		{Route{Method: "GET", Path: "/healthz", Auth: AuthNone}, opSpec{}, "[400 429 500 503]"},
		{Route{Method: "GET", Path: "/w/:id", Auth: AuthSecret}, opSpec{}, "[400 401 403 404 429 500 503]"},
		{Route{Method: "POST", Path: "/w", Auth: AuthPublicKey, Idempotent: true}, opSpec{}, "[400 401 403 409 413 422 429 500 503]"},
		{Route{Method: "POST", Path: "/cb/:token", Auth: AuthCallback}, opSpec{Errors: []int{504}}, "[400 404 413 429 500 503 504]"},
		{Route{Method: "GET", Path: "/sandbox/mail", Auth: AuthSandbox}, opSpec{}, "[400 401 403 404 429 500 503]"},
	} {
		got, _ := json.Marshal(errorStatuses(c.r, c.spec))
		if strings.ReplaceAll(string(got), ",", " ") != c.want {
			t.Errorf("%s %s (%s): %s, want %s", c.r.Method, c.r.Path, c.r.Auth, got, c.want)
		}
	}
}
