package api

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/lib/pq"

	"paysvc/storage/storagetest"
)

// A PostgreSQL data exception (SQLSTATE class 22) is the request's bad data that
// slipped past the edge's checks: it must leave as a 400 with a generic message,
// never a 500 and never the driver's text (which can quote the value), and be
// logged at warn so the gap is seen. The errors are real ones from PostgreSQL.
func TestHandleErrorDataExceptionIsA400(t *testing.T) {
	t.Parallel()
	schema := storagetest.New(t)
	for _, tc := range []struct {
		name, query string
		args        []any
		code        string
	}{
		{"NULInText", `SELECT $1::text`, []any{"secret\x00value"}, "22021"},
		{"InvalidUTF8", `SELECT $1::text`, []any{"secret\xffvalue"}, "22021"},
		{"NumericOutOfRange", `SELECT $1::numeric(20,2)`, []any{"1000000000000000000000"}, "22003"},
		{"InvalidTextRepresentation", `SELECT $1::uuid`, []any{"secret-value"}, "22P02"},
		{"NULInJSONB", `SELECT $1::jsonb`, []any{`{"a":"secret\u0000value"}`}, "22P05"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out string
			err := schema.DB.QueryRow(tc.query, tc.args...).Scan(&out)
			var pqErr *pq.Error
			if !errors.As(err, &pqErr) || string(pqErr.Code) != tc.code {
				t.Fatalf("PostgreSQL answered %v, want SQLSTATE %s", err, tc.code)
			}
			var logs bytes.Buffer
			s := &Server{log: slog.New(slog.NewJSONHandler(&logs, nil))}
			e := echo.New()
			rec := httptest.NewRecorder()
			c := e.NewContext(httptest.NewRequest(http.MethodPost, "/api/v1/x", nil), rec)
			s.handleError(fmt.Errorf("insert checkout: %w", err), c)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			if strings.Contains(rec.Body.String(), "secret") || strings.Contains(rec.Body.String(), pqErr.Message) ||
				!strings.Contains(rec.Body.String(), `"type":"validation_error"`) {
				t.Fatalf("body %s shows the driver's text or lacks the error shape", rec.Body)
			}
			if !strings.Contains(logs.String(), `"level":"WARN"`) || strings.Contains(logs.String(), `"level":"ERROR"`) {
				t.Fatalf("logged %s, want one warning", logs.String())
			}
		})
	}
	t.Run("OtherDatabaseErrorsStayInternal", func(t *testing.T) {
		t.Parallel()
		_, err := schema.DB.Exec(`SELECT * FROM no_such_table`)
		s := &Server{log: slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil))}
		rec := httptest.NewRecorder()
		s.handleError(err, echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec))
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("undefined table: %d, want 500 (a bug, not the client's data)", rec.Code)
		}
	})
}
