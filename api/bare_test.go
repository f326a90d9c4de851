package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"paysvc/api"
	"paysvc/cmd/paysvc/service/servicetest"
)

// bareAPI is the API's handler built as the service builds it, with no database,
// broker or engine behind it: the lightest fixture for what the HTTP edge answers
// on its own (routing, request ids, body limits, credentials refused before any
// key is looked up). A request that reaches a lookup fails; tests send none.
type bareAPI struct {
	t *testing.T
	h http.Handler
}

func newBareAPI(t *testing.T, cfg api.Config) bareAPI {
	t.Helper()
	if cfg.PublicBaseURL == "" {
		cfg.PublicBaseURL = "http://localhost"
	}
	return bareAPI{t: t, h: api.New(cfg, api.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()}
}

// Do is servicetest.Env.Do on the handler: the same body encoding and headers.
func (b bareAPI) Do(method, path string, body any, headers ...string) servicetest.Response {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(v)
	default:
		enc, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	return servicetest.Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
}
