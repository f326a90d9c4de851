package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"paysvc/cmd/paysvc/service"
)

// probeCmd asks this machine's paysvc operator listener for its health, for
// container healthchecks: the production image has no shell and no curl. It
// succeeds when every path answers 200 (by default /livez and /readyz).
func probeCmd(ctx context.Context, cfg service.Config, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", cfg.AdminAddr, "operator listener to ask (default PAYSVC_ADMIN_ADDR)")
	timeout := fs.Duration("timeout", 4*time.Second, "bound of each request")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *addr == service.AdminOff {
		return usageError{"paysvc probe: PAYSVC_ADMIN_ADDR is off; give --addr"}
	}
	paths := fs.Args()
	if len(paths) == 0 {
		paths = []string{"/livez", "/readyz"}
	}
	base := "http://" + dialable(*addr)
	client := &http.Client{Timeout: *timeout}
	var failed []string
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") {
			return usageError{fmt.Sprintf("paysvc probe: %q is not a path", p)}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(stdout, "%s unreachable\n", p)
			failed = append(failed, p)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		fmt.Fprintf(stdout, "%s %d %s\n", p, resp.StatusCode, strings.TrimSpace(string(body)))
		if resp.StatusCode != http.StatusOK {
			failed = append(failed, p)
		}
	}
	if len(failed) > 0 {
		return errors.New("probe failed: " + strings.Join(failed, ", "))
	}
	return nil
}

// dialable turns a listen address into one to connect to: a wildcard host
// (0.0.0.0, ::, empty) is this machine's loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
