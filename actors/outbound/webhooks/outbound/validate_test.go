package outbound

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateEndpoint(t *testing.T) {
	guarded := New(Options{})
	open := New(Options{AllowPrivate: true})
	cases := []struct {
		name    string
		c       *Client
		url     string
		wantErr error  // nil = valid
		mention string // substring the error must contain
	}{
		{"https ok", guarded, "https://example.com", nil, ""},
		{"https path and query ok", guarded, "https://hooks.example.com/paysvc?x=1", nil, ""},
		{"port allowed", guarded, "https://example.com:8443/hook", nil, ""},
		{"public ip literal ok", guarded, "https://93.184.216.34/hook", nil, ""},
		{"http refused", guarded, "http://example.com/hook", ErrInvalidEndpoint, "https is required"},
		{"userinfo refused", guarded, "https://user:secret@example.com/hook", ErrInvalidEndpoint, "credentials"},
		{"userinfo refused in sandbox", open, "http://user@localhost/hook", ErrInvalidEndpoint, "credentials"},
		{"private ip literal refused", guarded, "https://10.0.0.1/hook", ErrForbiddenAddress, "10.0.0.1"},
		{"loopback literal refused", guarded, "https://127.0.0.1:8443/", ErrForbiddenAddress, "127.0.0.1"},
		{"metadata refused", guarded, "https://169.254.169.254/latest/meta-data", ErrForbiddenAddress, "169.254.169.254"},
		{"ipv6 loopback refused", guarded, "https://[::1]/", ErrForbiddenAddress, "::1"},
		{"mapped ipv6 refused", guarded, "https://[::ffff:10.0.0.1]/", ErrForbiddenAddress, "10.0.0.1"},
		{"link-local with zone refused", guarded, "https://[fe80::1%25eth0]/", ErrForbiddenAddress, "fe80::1"},
		{"localhost refused", guarded, "https://localhost/", ErrForbiddenAddress, "loopback"},
		{"sub.localhost refused", guarded, "https://a.LOCALHOST./", ErrForbiddenAddress, "loopback"},
		{"decimal ipv4 refused", guarded, "https://2130706433/", ErrInvalidEndpoint, "numeric"},
		{"short ipv4 refused", guarded, "https://127.1/", ErrInvalidEndpoint, "numeric"},
		{"hex ipv4 refused", guarded, "https://0x7f.0.0.1/", ErrInvalidEndpoint, "numeric"},
		{"ftp refused", guarded, "ftp://example.com/", ErrInvalidEndpoint, "scheme"},
		{"relative refused", guarded, "/hook", ErrInvalidEndpoint, "absolute"},
		{"no host refused", guarded, "https:///hook", ErrInvalidEndpoint, "no host"},
		{"opaque refused", guarded, "https:example.com", ErrInvalidEndpoint, "no host"},
		{"port out of range", guarded, "https://example.com:70000/", ErrInvalidEndpoint, "port"},
		{"garbage refused", guarded, "https://exa mple.com/", ErrInvalidEndpoint, "not a valid URL"},
		{"sandbox allows http loopback", open, "http://127.0.0.1:8080/hook", nil, ""},
		{"sandbox allows private literal", open, "https://10.0.0.1/hook", nil, ""},
		{"sandbox allows localhost", open, "http://localhost:3000/", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.c.ValidateEndpoint(c.url)
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("ValidateEndpoint(%q) = %v, want nil", c.url, err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("ValidateEndpoint(%q) = %v, want %v", c.url, err, c.wantErr)
			}
			if !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("error %q does not mention %q", err, c.mention)
			}
		})
	}
}

func TestValidateEndpointNeverEchoesPassword(t *testing.T) {
	c := New(Options{})
	for _, u := range []string{
		"https://user:hunter2@example.com/",
		"http://user:hunter2@example.com/",
		"https://user:hunter2@exa mple.com/",
		"ftp://user:hunter2@example.com/",
	} {
		err := c.ValidateEndpoint(u)
		if err == nil {
			t.Fatalf("%q: want an error", u)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("%q: error leaks the password: %v", u, err)
		}
	}
}
