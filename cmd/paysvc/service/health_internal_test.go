package service

import (
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// /livez fails once a role's loop has ended on its own, and only then: loops
// that end because Close stopped them are not failures.
func TestLivez(t *testing.T) {
	t.Parallel()
	livez := func(s *Service) (int, string) {
		rec := httptest.NewRecorder()
		s.livez(rec, httptest.NewRequest("GET", "/livez", nil))
		return rec.Code, rec.Body.String()
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Run("LoopFailed", func(t *testing.T) {
		s := &Service{Log: quiet}
		if code, body := livez(s); code != 200 || !strings.Contains(body, `"alive"`) {
			t.Fatalf("before: %d %s", code, body)
		}
		s.goRun(func() error { return errors.New("role gave up") })
		s.wg.Wait()
		if code, body := livez(s); code != 503 || !strings.Contains(body, `"stopped_loops":1`) {
			t.Fatalf("after a loop failed: %d %s", code, body)
		}
	})
	t.Run("LoopStoppedByClose", func(t *testing.T) {
		s := &Service{Log: quiet}
		s.closing.Store(true)
		s.goRun(func() error { return nil })
		s.wg.Wait()
		if code, body := livez(s); code != 200 {
			t.Fatalf("a loop Close stopped: %d %s", code, body)
		}
	})
}
