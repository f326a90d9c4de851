package mail

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	cases := []struct {
		raw  string
		want Config
	}{
		{"smtp://mail.example.com", Config{Host: "mail.example.com", Port: 25, StartTLS: StartTLSOptional}},
		{"smtp://u:p@mail.example.com", Config{Host: "mail.example.com", Port: 587, Username: "u", Password: "p", StartTLS: StartTLSOptional}},
		{"smtps://u:p@mail.example.com", Config{Host: "mail.example.com", Port: 465, Username: "u", Password: "p", ImplicitTLS: true, StartTLS: StartTLSOptional}},
		{"SMTP://mail.example.com:2525?starttls=off", Config{Host: "mail.example.com", Port: 2525, StartTLS: StartTLSOff}},
		{
			"smtp://user:pass@mail.example.com:587?from=billing@example.com&starttls=required",
			Config{Host: "mail.example.com", Port: 587, Username: "user", Password: "pass", From: "billing@example.com", StartTLS: StartTLSRequired},
		},
		{
			"smtp://apikey:p%40ss%3Aw%2Frd%3F%23%25@[::1]:1025?from=Billing%20%3Cbilling@example.com%3E&insecure_skip_verify=true&helo=app.example.com",
			Config{Host: "::1", Port: 1025, Username: "apikey", Password: "p@ss:w/rd?#%", From: "Billing <billing@example.com>",
				StartTLS: StartTLSOptional, InsecureSkipVerify: true, HeloName: "app.example.com"},
		},
		{"smtp://127.0.0.1:2525/", Config{Host: "127.0.0.1", Port: 2525, StartTLS: StartTLSOptional}},
	}
	for _, c := range cases {
		got, err := ParseURL(c.raw)
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		if c.want.HeloName == "" {
			c.want.HeloName = got.HeloName // machine dependent
			if !validHelo(got.HeloName) {
				t.Errorf("%s: default helo %q", c.raw, got.HeloName)
			}
		}
		if got != c.want {
			t.Errorf("%s:\n got %#v\nwant %#v\n(%+v)", c.raw, got.String(), c.want.String(), got)
		}
	}
}

func TestParseURLErrors(t *testing.T) {
	for _, raw := range []string{
		"",
		"mail.example.com:25",
		"http://mail.example.com",
		"smtp://",
		"smtp://:25",
		"smtp://mail.example.com:0",
		"smtp://mail.example.com:99999",
		"smtp://mail.example.com/path",
		"smtp://mail.example.com?startls=required",
		"smtp://mail.example.com?starttls=maybe",
		"smtp://mail.example.com?starttls=off&starttls=required",
		"smtp://mail.example.com?from=not-an-address",
		"smtp://mail.example.com?insecure_skip_verify=yes",
		"smtp://mail.example.com?helo=bad%20name",
		"smtps://mail.example.com?starttls=required",
	} {
		if _, err := ParseURL(raw); err == nil {
			t.Errorf("%q: no error", raw)
		} else if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: %v does not wrap ErrInvalidConfig", raw, err)
		}
	}
}

// The password, and for URLs that do not parse any fragment of what might be
// the password, never shows up in errors.
func TestParseURLErrorsHidePassword(t *testing.T) {
	const secret = "S3cr3tPw"
	for _, raw := range []string{
		"smtp://user:" + secret + "@mail.example.com:badport",
		"smtp://user:" + secret + "%zz@mail.example.com",
		"smtp://user:" + secret + "@mail example.com",
		"smtp://user:" + secret + "@mail.example.com/x",
		"smtp://user:" + secret + "@mail.example.com?startls=required",
		"smtp://user:" + secret + "@mail.example.com:70000",
		"ftp://user:" + secret + "@mail.example.com",
		"user:" + secret + "@mail.example.com",
		// Unencoded special characters move parts of the password elsewhere.
		"smtp://user:" + secret + "/x@mail.example.com",
		"smtp://user:" + secret + "#x@mail.example.com",
		"smtp://user:123?" + secret + "@mail.example.com",
		"smtp://user:123?x=" + secret + "@mail.example.com",
		"smtp://user:123?from=" + secret + "@mail.example.com&from=a@b.c",
		"smtp://user:123?starttls=" + secret + "@mail.example.com",
		"smtp://user:99999?" + secret + "@mail.example.com",
		"smtp://user:" + secret + "\n@mail.example.com",
	} {
		_, err := ParseURL(raw)
		if err == nil {
			t.Errorf("%q: no error", raw)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "99999") || strings.Contains(err.Error(), "123") {
			t.Errorf("error leaks password: %v", err)
		}
	}
}

func TestConfigStringHidesPassword(t *testing.T) {
	const secret = "S3cr3tPw"
	cfg, err := ParseURL("smtp://user:" + secret + "@mail.example.com:587?from=billing@example.com&starttls=required")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "cfg", cfg)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "cfg", cfg)
	outs := []string{
		cfg.String(), fmt.Sprint(cfg), fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg),
		fmt.Sprint(&cfg), logs.String(),
	}
	for _, out := range outs {
		if strings.Contains(out, secret) {
			t.Errorf("password printed: %s", out)
		}
	}
	want := "smtp://user:xxxxx@mail.example.com:587?from=billing%40example.com&helo=" + cfg.HeloName + "&starttls=required"
	if cfg.String() != want {
		t.Errorf("String() = %q, want %q", cfg.String(), want)
	}
	// String round-trips (minus the password).
	back, err := ParseURL(cfg.String())
	if err != nil {
		t.Fatal(err)
	}
	back.Password = secret
	if back != cfg {
		t.Errorf("round trip: %+v", back)
	}
}
