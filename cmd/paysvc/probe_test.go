package main

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service/servicetest"
)

// paysvc probe is the container healthcheck: exit 0 only when every path the
// operator listener is asked answers 200.
func TestProbe(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	// PAYSVC_ADMIN_ADDR as compose sets it: a wildcard host is asked on loopback.
	_, port, _ := net.SplitHostPort(env.Svc.AdminAddr)
	cfgEnv := envWith(noDatabase, "PAYSVC_ADMIN_ADDR", "0.0.0.0:"+port)
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		r := runCLI(t, cfgEnv, "probe")
		if r.err == nil {
			if !strings.Contains(r.stdout, "/livez 200") || !strings.Contains(r.stdout, "/readyz 200") {
				t.Fatalf("probe output: %s", r.stdout)
			}
			return true, ""
		}
		return false, fmt.Sprintf("probe of a healthy service never passed: %v", r)
	})
	if r := runCLI(t, cfgEnv, "probe", "/livez", "/no-such-path"); r.err == nil || !strings.Contains(r.err.Error(), "/no-such-path") {
		t.Errorf("a 404 passed: %v", r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if r := runCLI(t, envWith(noDatabase), "probe", "--addr", closed); r.err == nil || !strings.Contains(r.stdout, "unreachable") {
		t.Errorf("a closed port passed: %v", r)
	}
	if r := runCLI(t, envWith(noDatabase, "PAYSVC_ADMIN_ADDR", "off"), "probe"); r.err == nil {
		t.Errorf("probe with the operator listener off passed: %v", r)
	}
}
