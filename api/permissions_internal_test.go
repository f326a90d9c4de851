package api

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"paysvc/api/edge"
)

// Every route of the router carries a declared access (who may call it and, for
// secret keys, which permission a restricted key needs). A route registered any other
// way than through routes()'s table has none, and fails here: no later route can
// forget its permission.
func TestEveryRouteDeclaresAccess(t *testing.T) {
	t.Parallel()
	s := New(Config{}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	routes := s.echo.Routes()
	if len(routes) < 40 {
		t.Fatalf("only %d routes: the walk does not see the router", len(routes))
	}
	seen := map[string]bool{}
	for _, r := range routes {
		key := r.Method + " " + r.Path
		seen[key] = true
		a, ok := s.declared[key]
		if !ok {
			t.Errorf("route %s declares no access: register it in routes() with its permission", key)
			continue
		}
		if _, named := kindNames[a.kind]; !named {
			t.Errorf("route %s: unknown access kind %d", key, a.kind)
		}
		switch a.kind {
		case kindSecret, kindPublicOrSecret, kindCollection, kindStatus:
			if !edge.KnownPermission(a.perm) {
				t.Errorf("route %s accepts secret keys but names no known permission (%q)", key, a.perm)
			}
			if a.what == "" {
				t.Errorf("route %s: the 403 would not say what the permission is for", key)
			}
		default:
			if a.perm != "" {
				t.Errorf("route %s accepts no secret key yet declares %q", key, a.perm)
			}
		}
		// An open route whose path names something (a checkout, a link, a token)
		// opens a capability: it must declare it, so bindCapability refuses other
		// environments' and disabled merchants' (capability.go). Only the static
		// files name nothing of a merchant.
		if a.kind == kindOpen && strings.Contains(r.Path, "/:") && a.capability == nil && r.Path != "/static/:name" {
			t.Errorf("open route %s names a path parameter but declares no capability", key)
		}
	}
	for key := range s.declared {
		if !seen[key] {
			t.Errorf("declared %s is not a route of the router", key)
		}
	}
	// A route added behind routes()'s back is caught.
	s.echo.Add("POST", "/api/v1/forgotten", func(c echo.Context) error { return nil })
	missing := 0
	for _, r := range s.echo.Routes() {
		if _, ok := s.declared[r.Method+" "+r.Path]; !ok {
			missing++
		}
	}
	if missing != 1 {
		t.Fatalf("an undeclared route went unnoticed (%d missing)", missing)
	}
}
