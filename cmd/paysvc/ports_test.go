package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Addresses with a fixed port that tests may write, each with why it is no listener.
// Keyed by file (from the repository root) and the literal as written.
var fixedPortAllowed = map[string]string{
	"actors/outbound/webhooks/outbound/guard_test.go " + `"127.0.0.1:443"`: "dialled to be refused by the SSRF guard, never listened on",
	"cmd/paysvc/listen_test.go " + `"localhost:3000"`:                      "a malformed --forward-to URL that the CLI refuses",
	"cmd/paysvc/service/publicurl_test.go " + `"127.0.0.1:8080"`:           "input of the public base URL derivation; nothing listens",
	"cmd/paysvc/service/publicurl_test.go " + `"0.0.0.0:8080"`:             "input of the public base URL derivation; nothing listens",
	"cmd/paysvc/service/publicurl_test.go " + `"[::]:8080"`:                "input of the public base URL derivation; nothing listens",
	"cmd/paysvc/service/publicurl_test.go " + `"[::1]:9000"`:               "input of the public base URL derivation; nothing listens",
	"cmd/paysvc/service/edge_test.go " + `"127.0.0.1:9090"`:                "compared with FromEnv's default admin address; nothing listens",
	"ops/composetest/compose_test.go " + `":4317"`:                         "the collector config's gRPC endpoint, read from compose's files; nothing listens",
	"ops/composetest/compose_test.go " + `":4318"`:                         "the collector config's HTTP endpoint, read from compose's files; nothing listens",
	"cmd/paysvc/quickstart_test.go " + `"localhost:8080"`:                  "the README's address, rewritten to the test service's; nothing listens on it",
}

// Test functions that run `serve` without setting every listener to port 0, each
// with why it never listens.
var serveWithoutFreePortsAllowed = map[string]string{
	"cmd/paysvc/main_test.go TestBadConfiguration": "its serve cases are refused by the configuration check before any listener starts",
}

// The variables of every listener `paysvc serve` opens; a test that runs serve sets
// each to port 0 (or the admin listener to off), or it fails whenever `make run`, a
// Prometheus or another test holds the default port.
var listenerVars = []string{"PAYSVC_HTTP_ADDR", "PAYSVC_ADMIN_ADDR", "PAYSVC_KAFKA_PORT", "PAYSVC_SMTP_SINK_ADDR"}

// TestNoFixedPortListeners: no test listens on a fixed port. A literal host:port with a
// port other than 0 in a test file, or a test that runs `serve` without setting every
// listener variable, fails here unless allow-listed above with the reason it never
// listens.
func TestNoFixedPortListeners(t *testing.T) {
	t.Parallel()
	addr := regexp.MustCompile(`"(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1?\]|)?:([0-9]{2,5})"`)
	files := 0
	walkGo(t, true, func(path string) error {
		if strings.HasSuffix(path, "cmd/paysvc/ports_test.go") {
			return nil
		}
		files++
		rel := strings.TrimPrefix(filepath.ToSlash(path), repoRoot+"/")
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range addr.FindAllStringSubmatch(string(src), -1) {
			if m[1] == "0" || fixedPortAllowed[rel+" "+m[0]] != "" {
				continue
			}
			t.Errorf("%s: the address %s has a fixed port: listen on port 0 (127.0.0.1:0) and read the address back; "+
				"if it is never listened on (dialled to be refused, parsed only), add %q to fixedPortAllowed in "+
				"cmd/paysvc/ports_test.go with the reason", rel, m[0], rel+" "+m[0])
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			body := string(src[fn.Body.Pos()-f.FileStart : fn.Body.End()-f.FileStart])
			if !strings.Contains(body, `"serve"`) || !regexp.MustCompile(`\brun\(`).MatchString(body) {
				continue
			}
			key := rel + " " + fn.Name.Name
			if serveWithoutFreePortsAllowed[key] != "" {
				continue
			}
			for _, v := range listenerVars {
				if !strings.Contains(body, `"`+v+`"`) {
					t.Errorf("%s: %s runs `paysvc serve` without setting %s, so it listens on the default port: "+
						"set it to port 0 (\"127.0.0.1:0\", or \"0\" for PAYSVC_KAFKA_PORT)", rel, fn.Name.Name, v)
				}
			}
		}
		return nil
	})
	if files < 50 {
		t.Fatalf("found only %d test files: the walk does not see the repository", files)
	}
}
