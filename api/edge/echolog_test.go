package edge_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/labstack/gommon/log"

	"paysvc/api/edge"
)

// records decodes the JSON lines a slog handler wrote.
func records(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		out = append(out, m)
	}
	return out
}

func TestEchoLoggerWritesSlogRecords(t *testing.T) {
	var buf bytes.Buffer
	l := edge.EchoLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Debug("hidden below info")
	l.Warnf("response %s", "already committed")
	l.Errorj(log.JSON{"route": "/x"})
	_, _ = l.Output().Write([]byte("http: TLS handshake error\n"))
	l.SetLevel(log.ERROR)
	l.Warn("hidden below error")

	got := records(t, &buf)
	want := []struct{ level, msg string }{
		{"WARN", "response already committed"}, {"ERROR", "echo"}, {"WARN", "http: TLS handshake error"},
	}
	if len(got) != len(want) {
		t.Fatalf("records = %v, want %d", got, len(want))
	}
	for i, w := range want {
		if got[i]["level"] != w.level || got[i]["msg"] != w.msg || got[i]["component"] != "echo" {
			t.Errorf("record %d = %v, want level %s msg %q component echo", i, got[i], w.level, w.msg)
		}
	}
	if f, _ := got[1]["fields"].(map[string]any); f["route"] != "/x" {
		t.Errorf("Errorj fields = %v, want route /x", got[1]["fields"])
	}
}

// A handler that answers twice makes Echo itself complain; with the bridge the
// complaint is a structured record in the service's log.
func TestEchoComplaintsReachSlog(t *testing.T) {
	var buf bytes.Buffer
	e := echo.New()
	e.Logger = edge.EchoLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
	e.GET("/twice", func(c echo.Context) error {
		_ = c.NoContent(http.StatusNoContent)
		return c.NoContent(http.StatusOK)
	})
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/twice", nil))
	got := records(t, &buf)
	if len(got) != 1 || got[0]["msg"] != "response already committed" || got[0]["level"] != "WARN" {
		t.Fatalf("records = %v, want one WARN \"response already committed\"", got)
	}
}
