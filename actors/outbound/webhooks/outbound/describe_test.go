package outbound

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"paysvc/actors/values/nettest"
)

// Each kind of transport failure, produced for real, gets its own merchant-facing
// words, and none of them repeats the raw error's addresses.
func TestDescribe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := New(Options{AllowPrivate: true, Timeout: 300 * time.Millisecond})
	guarded := New(Options{})

	closedAddr := nettest.RefusingAddr(t)

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // then the server notices the client hanging up
		select {                  // longer than the client's timeout; ends as soon as the client gives up
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer untrusted.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()

	cases := []struct {
		name   string
		client *Client
		url    string
		want   string
	}{
		{"refused", open, "http://" + closedAddr + "/hook", "connection refused"},
		{"timeout", open, slow.URL, "timed out"},
		{"untrusted certificate", open, untrusted.URL, "TLS: the endpoint's certificate could not be verified"},
		{"plain http spoken to as TLS", open, strings.Replace(plain.URL, "http://", "https://", 1), "TLS: the endpoint did not speak TLS"},
		{"forbidden address", guarded, "https://127.0.0.1:9/hook", "the endpoint's address is not allowed (loopback, private or otherwise internal)"},
		{"invalid URL", guarded, "ftp://example.com/hook", "the endpoint URL is not valid"},
	}
	for _, c := range cases {
		_, err := c.client.Post(ctx, c.url, nil, []byte(`{}`))
		if err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		got := Describe(err)
		if got != c.want {
			t.Errorf("%s: Describe(%q) = %q, want %q", c.name, err, got, c.want)
		}
		if strings.Contains(got, "127.0.0.1") {
			t.Errorf("%s: the description names an address: %q", c.name, got)
		}
	}
	if Describe(nil) != "" {
		t.Error("Describe(nil) should be empty")
	}
}
