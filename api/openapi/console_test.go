package openapi

import (
	"encoding/json"
	"testing"
)

// A console route (its access, or its tag for the open sign-in routes) is
// described in the console's document only, with the one security scheme and the
// components it uses; the API document keeps neither the route nor the scheme.
func TestConsoleRoutesAreDescribedApart(t *testing.T) {
	t.Parallel()
	d, err := Build([]Route{
		{Method: "GET", Path: "/api/v1/wallets", Auth: AuthSecret, Permission: "view_wallets"},
		{Method: "GET", Path: "/console/wallets", Auth: AuthConsole},
		{Method: "GET", Path: "/console/sign-in", Auth: AuthNone},
	}, "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	type doc struct {
		Paths      map[string]any `json:"paths"`
		Webhooks   map[string]any `json:"webhooks"`
		Components struct {
			Schemas         map[string]any `json:"schemas"`
			SecuritySchemes map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	var api, console doc
	if err := json.Unmarshal(d.JSON, &api); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(d.ConsoleJSON, &console); err != nil {
		t.Fatal(err)
	}
	if len(api.Paths) != 1 || api.Paths["/api/v1/wallets"] == nil || api.Components.SecuritySchemes["consoleSession"] != nil {
		t.Errorf("the API document has paths %v and schemes %v", keys(api.Paths), keys(api.Components.SecuritySchemes))
	}
	if len(console.Paths) != 2 || console.Paths["/console/sign-in"] == nil || len(console.Components.SecuritySchemes) != 1 ||
		console.Components.SecuritySchemes["consoleSession"] == nil {
		t.Errorf("the console document has paths %v and schemes %v", keys(console.Paths), keys(console.Components.SecuritySchemes))
	}
	if len(console.Components.Schemas) != 1 || console.Components.Schemas["Error"] == nil || console.Webhooks != nil {
		t.Errorf("the console document carries schemas %v and webhooks %v", keys(console.Components.Schemas), console.Webhooks)
	}
	if len(api.Webhooks) != 5 {
		t.Errorf("the API document has webhooks %v", keys(api.Webhooks))
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
