package service_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
)

// Operators' endpoints live on their own listener (PAYSVC_ADMIN_ADDR, loopback by
// default); the public port does not serve them.
func TestAdminListener(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, nil)
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	notFoundJSON := func(status int, body string) bool {
		var e struct{ Detail string }
		return status == 404 && json.Unmarshal([]byte(body), &e) == nil && e.Detail != ""
	}

	t.Run("PublicPortHasNoOperatorEndpoints", func(t *testing.T) {
		for _, path := range []string{"/metrics", "/metrics/", "/debug/pprof/", "/debug/pprof/goroutine", "/debug/pprof/cmdline",
			"/debug/vars", "/readyz", "/livez"} {
			if status, body := get(env.BaseURL + path); !notFoundJSON(status, body) {
				t.Errorf("public %s: %d %.200s", path, status, body)
			}
		}
		if status, _ := get(env.BaseURL + "/healthz"); status != 200 {
			t.Errorf("public /healthz (load balancers): %d", status)
		}
	})
	t.Run("AdminPortServesThem", func(t *testing.T) {
		if !strings.HasPrefix(env.Svc.AdminAddr, "127.0.0.1:") {
			t.Fatalf("admin listener on %q", env.Svc.AdminAddr)
		}
		if status, body := get(env.AdminURL + "/metrics"); status != 200 || !strings.Contains(body, "paysvc_http_requests_total") {
			t.Errorf("admin /metrics: %d %.200s", status, body)
		}
		if status, body := get(env.AdminURL + "/healthz"); status != 200 || !strings.Contains(body, `"ok"`) {
			t.Errorf("admin /healthz: %d %s", status, body)
		}
		if status, body := get(env.AdminURL + "/debug/pprof/"); status != 200 || !strings.Contains(body, "goroutine") {
			t.Errorf("admin /debug/pprof/: %d %.200s", status, body)
		}
		if status, body := get(env.AdminURL + "/debug/pprof/goroutine?debug=1"); status != 200 || !strings.Contains(body, "goroutine profile") {
			t.Errorf("admin goroutine profile: %d %.200s", status, body)
		}
		if status, _ := get(env.AdminURL + "/livez"); status != 200 {
			t.Errorf("admin /livez: %d", status)
		}
		if status, body := get(env.AdminURL + "/readyz"); status != 200 && status != 503 || !strings.Contains(body, `"checks"`) {
			t.Errorf("admin /readyz: %d %s", status, body)
		}
		if status, body := get(env.AdminURL + "/api/v1/wallets/"); !notFoundJSON(status, body) {
			t.Errorf("the API on the admin port: %d %s", status, body)
		}
	})
	t.Run("RoleWithoutAPI", func(t *testing.T) {
		svc := startRoles(t, env, "relay-only", service.RoleRelay)
		if status, body := get("http://" + svc.Addr + "/metrics"); !notFoundJSON(status, body) {
			t.Errorf("relay's public /metrics: %d %.200s", status, body)
		}
		if status, _ := get("http://" + svc.Addr + "/healthz"); status != 200 {
			t.Errorf("relay's public /healthz: %d", status)
		}
		if status, body := get("http://" + svc.AdminAddr + "/metrics"); status != 200 || !strings.Contains(body, "go_goroutines") {
			t.Errorf("relay's admin /metrics: %d %.200s", status, body)
		}
		for _, path := range []string{"/debug/pprof/", "/readyz", "/livez"} {
			if status, body := get("http://" + svc.Addr + path); !notFoundJSON(status, body) {
				t.Errorf("relay's public %s: %d %.200s", path, status, body)
			}
		}
		if status, _ := get("http://" + svc.AdminAddr + "/debug/pprof/"); status != 200 {
			t.Errorf("relay's admin /debug/pprof/: %d", status)
		}
	})
	t.Run("Off", func(t *testing.T) {
		cfg := env.Config
		cfg.Roles = []string{service.RoleRelay}
		cfg.KafkaBrokers = env.Svc.Brokers
		cfg.InstanceID = "relay-no-admin"
		cfg.AdminAddr = service.AdminOff
		svc := servicetest.Launch(t, cfg)
		defer svc.Close()
		if svc.AdminAddr != "" {
			t.Fatalf("admin listener on %q although off", svc.AdminAddr)
		}
		if status, body := get("http://" + svc.Addr + "/metrics"); !notFoundJSON(status, body) {
			t.Errorf("public /metrics with the admin listener off: %d %.200s", status, body)
		}
	})
	t.Run("Configuration", func(t *testing.T) {
		cfg := func(env map[string]string) (service.Config, error) {
			return service.FromEnv(func(k string) string { return env[k] })
		}
		c, err := cfg(nil)
		if err != nil || c.AdminAddr != "127.0.0.1:9090" {
			t.Fatalf("default admin address %q (%v)", c.AdminAddr, err)
		}
		if c.HTTP.Read != 10*time.Second || c.HTTP.Write != time.Minute || c.HTTP.Idle != 2*time.Minute || c.HTTP.BodyMinRate != 8192 {
			t.Fatalf("default HTTP timeouts %+v", c.HTTP)
		}
		for k, v := range map[string]string{"PAYSVC_ADMIN_ADDR": "9090", "PAYSVC_HTTP_WRITE_TIMEOUT": "15s",
			"PAYSVC_HTTP_BODY_MIN_RATE": "10", "PAYSVC_HTTP_READ_TIMEOUT": "0s"} {
			if _, err := cfg(map[string]string{k: v}); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%s=%s: %v, want an error naming it", k, v, err)
			}
		}
		if c.DrainDelay != 0 {
			t.Errorf("default drain delay %v", c.DrainDelay)
		}
		if c.KafkaNamespace != "" {
			t.Errorf("default Kafka namespace %q, want none (the topic names as they are)", c.KafkaNamespace)
		}
		if c, err := cfg(map[string]string{"PAYSVC_KAFKA_NAMESPACE": "staging."}); err != nil || c.KafkaNamespace != "staging." {
			t.Errorf("PAYSVC_KAFKA_NAMESPACE=staging.: %q (%v)", c.KafkaNamespace, err)
		}
		for _, v := range []string{"stag ing.", "__internal.", strings.Repeat("n", 250)} {
			if _, err := cfg(map[string]string{"PAYSVC_KAFKA_NAMESPACE": v}); err == nil || !strings.Contains(err.Error(), "PAYSVC_KAFKA_NAMESPACE") {
				t.Errorf("PAYSVC_KAFKA_NAMESPACE=%q: %v, want an error naming it", v, err)
			}
		}
		for _, v := range []string{"-1s", "2m"} {
			c, err := cfg(map[string]string{"PAYSVC_SHUTDOWN_DRAIN_DELAY": v})
			if err == nil {
				err = c.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), "PAYSVC_SHUTDOWN_DRAIN_DELAY") {
				t.Errorf("PAYSVC_SHUTDOWN_DRAIN_DELAY=%s: %v, want an error naming it", v, err)
			}
		}
	})
}

// A client that sends its headers and then dribbles the body is cut off: the body
// must keep a minimum average rate. An honest slow body is read, and the time to
// answer counts from its end, not from the headers.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	env := servicetest.Start(t, func(c *service.Config) {
		c.HTTP.Read = time.Second
		c.HTTP.BodyMinRate = 256
		c.HTTP.Write = 2 * time.Second
	})
	m := env.Merchant("Slow")
	head := func(length int) string {
		return fmt.Sprintf("POST /api/v1/wallets/ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", m.SecretKey, length)
	}

	t.Run("DribbledBodyIsCutOff", func(t *testing.T) {
		conn, err := net.Dial("tcp", env.Svc.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, head(100000)+"{"); err != nil {
			t.Fatal(err)
		}
		closed := make(chan string, 1)
		go func() { // whatever the server answers, it must then close the connection
			b, _ := io.ReadAll(conn)
			closed <- string(b)
		}()
		// One byte every 100 ms would take almost three hours to send the body.
		// The loop is the dribbling client, not a wait: its pace is what is
		// tested, so it keeps its own tick rather than waittest's backoff.
		deadline := time.After(30 * time.Second)
		sent := 1
		for {
			select {
			case answer := <-closed:
				if sent >= 100000 {
					t.Fatalf("the whole body went through: %s", answer)
				}
				if answer != "" && !strings.HasPrefix(answer, "HTTP/1.1 4") {
					t.Fatalf("answer to a dribbled body: %q", answer)
				}
				return
			case <-deadline:
				t.Fatalf("a body dribbled at 10 bytes/s still holds its connection after 30 s (%d bytes sent)", sent)
			case <-time.After(100 * time.Millisecond):
				if _, err := io.WriteString(conn, " "); err == nil {
					sent++
				}
			}
		}
	})
	t.Run("HonestSlowBodyIsAnswered", func(t *testing.T) {
		// About 500 bytes/s for 3 s: above the minimum rate, and longer than the
		// write bound, which must count from the body's end.
		body := []byte(`{"currency":"KES","wallet_type":"WORKING","label":"slow upload"}`)
		body = append(body, strings.Repeat(" ", 1500-len(body))...)
		conn, err := net.Dial("tcp", env.Svc.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, head(len(body))); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(body); i += 75 {
			time.Sleep(150 * time.Millisecond) // the slow client's pace: the delay is what is tested
			if _, err := conn.Write(body[i:min(i+75, len(body))]); err != nil {
				t.Fatalf("the server cut an honest body after %d bytes: %v", i, err)
			}
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to an honest slow body: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 201 {
			t.Fatalf("honest slow body: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("NormalRequest", func(t *testing.T) {
		r := env.Do("POST", "/api/v1/wallets/", map[string]any{"currency": "KES", "wallet_type": "WORKING", "label": "normal"},
			servicetest.Bearer(m.SecretKey)...)
		if r.Status != 201 {
			t.Fatalf("normal request: %d %s", r.Status, r.Body)
		}
	})
}
