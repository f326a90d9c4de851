package api

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"paysvc/api/mount"
)

// A kind's routes are registered through handle, so they are in Echo's router
// and the declared table like every built-in route; a declaration that would
// weaken or shadow the table is refused when the server is built.
func TestKindRoutesJoinTheRouteTable(t *testing.T) {
	t.Parallel()
	build := func(routes func(mount.Mount)) *Server {
		return New(Config{}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Kinds: []KindRoutes{{Name: "probe", Routes: routes}}})
	}
	noop := func(mount.Request) (mount.Command, error) { return mount.Command{}, nil }
	s := build(func(m mount.Mount) {
		m.Command(http.MethodPost, "/probes/:probe_id/poke", mount.Access{Permission: PermAddWallets, What: "poke probes"}, noop)
	})
	const key = "POST /api/v1/probes/:probe_id/poke"
	if a := s.declared[key]; a.kind != kindSecret || a.perm != PermAddWallets || !a.idempotent {
		t.Fatalf("declared %s: %+v", key, a)
	}
	found := false
	for _, r := range s.echo.Routes() {
		found = found || r.Method+" "+r.Path == key
	}
	if !found {
		t.Fatalf("%s is not in Echo's router", key)
	}

	for name, tc := range map[string]struct {
		routes func(mount.Mount)
		want   string
	}{
		"built-in route": {func(m mount.Mount) {
			m.Command(http.MethodPost, "/wallets", mount.Access{Permission: PermAddWallets, What: "x"}, noop)
		}, "served already"},
		"unknown permission": {func(m mount.Mount) {
			m.Command(http.MethodPost, "/probes", mount.Access{Permission: "add_probes", What: "x"}, noop)
		}, "catalogue"},
		"no what": {func(m mount.Mount) {
			m.Command(http.MethodPost, "/probes", mount.Access{Permission: PermAddWallets}, noop)
		}, "catalogue"},
		"command by GET": {func(m mount.Mount) {
			m.Command(http.MethodGet, "/probes", mount.Access{Permission: PermViewWallets, What: "x"}, noop)
		}, "POST, PUT, PATCH or DELETE"},
		"get without load": {func(m mount.Mount) {
			m.Get("/probes/:probe_id", mount.Access{Permission: PermViewWallets, What: "x"}, "probe_id", nil)
		}, "Load"},
		"refusal not 4xx":  {func(m mount.Mount) { m.Refusals(map[string]int{"probe_broken": 500}) }, "4xx"},
		"refusal remapped": {func(m mount.Mount) { m.Refusals(map[string]int{"not_found": 409}) }, "the API's already"},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), tc.want) {
					t.Errorf("%s: panic %v, want one saying %q", name, r, tc.want)
				}
			}()
			build(tc.routes)
		}()
	}
}
