package service_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"paysvc/cmd/paysvc/service"
)

func fromEnv(vars map[string]string) (service.Config, error) {
	return service.FromEnv(func(k string) string { return vars[k] })
}

// A boolean takes the usual words for yes and no; anything else stops the start
// and names the variable, where `== "true"` used to read "1" as off.
func TestFlagsParseStrictly(t *testing.T) {
	for _, v := range []string{"true", "TRUE", "1", "yes", "on", " On "} {
		c, err := fromEnv(map[string]string{"PAYSVC_KAFKA_SYNC_WRITES": v})
		if err != nil || !c.KafkaSyncWrites {
			t.Errorf("PAYSVC_KAFKA_SYNC_WRITES=%q: sync %v, err %v; want on", v, c.KafkaSyncWrites, err)
		}
	}
	for _, v := range []string{"false", "0", "no", "off", ""} {
		c, err := fromEnv(map[string]string{"PAYSVC_KAFKA_SYNC_WRITES": v})
		if err != nil || c.KafkaSyncWrites {
			t.Errorf("PAYSVC_KAFKA_SYNC_WRITES=%q: sync %v, err %v; want off", v, c.KafkaSyncWrites, err)
		}
	}
	for _, k := range []string{"PAYSVC_KAFKA_SYNC_WRITES", "PAYSVC_ACCEPT_COMMAND_LOG_RESET", "PAYSVC_ALLOW_EMBEDDED_KAFKA",
		"PAYSVC_ALLOW_SMTP_SINK", "PAYSVC_WEBHOOK_ALLOW_PRIVATE", "PAYSVC_DARAJA_ALLOW_SANDBOX_IN_LIVE"} {
		_, err := fromEnv(map[string]string{k: "ture"})
		if err == nil || !strings.Contains(err.Error(), k+": not a boolean") {
			t.Errorf("%s=ture: err %v, want it named as not a boolean", k, err)
		}
	}
	if _, err := fromEnv(map[string]string{"PAYSVC_REPLY_TIMEOUT": "10"}); err == nil || !strings.Contains(err.Error(), "PAYSVC_REPLY_TIMEOUT: not a duration") {
		t.Errorf("PAYSVC_REPLY_TIMEOUT=10 (no unit): err %v, want it named as not a duration", err)
	}
}

// Any variable may come from the file NAME_FILE names (secrets mounted by an
// orchestrator); an error names the variable and the file, never the value.
func TestVariablesFromFiles(t *testing.T) {
	dir := t.TempDir()
	secret := "postgres://paysvc:s3cr3t-pw@db.internal:5432/paysvc?sslmode=verify-full"
	path := filepath.Join(dir, "database_url")
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := fromEnv(map[string]string{"PAYSVC_DATABASE_URL_FILE": path})
	if err != nil || c.DatabaseURL != secret {
		t.Fatalf("from file: url %q, err %v; want the file's line", c.DatabaseURL, err)
	}
	_, err = fromEnv(map[string]string{"PAYSVC_DATABASE_URL_FILE": path, "PAYSVC_DATABASE_URL": secret})
	if err == nil || !strings.Contains(err.Error(), "PAYSVC_DATABASE_URL and PAYSVC_DATABASE_URL_FILE are both set") {
		t.Errorf("both set: err %v, want a refusal naming both", err)
	}
	missing := filepath.Join(dir, "nope")
	_, err = fromEnv(map[string]string{"PAYSVC_DARAJA_PASSKEY_FILE": missing})
	if err == nil || !strings.Contains(err.Error(), "PAYSVC_DARAJA_PASSKEY_FILE: cannot read "+missing) {
		t.Errorf("unreadable file: err %v, want it named", err)
	}
	for _, e := range []error{err} {
		if e != nil && strings.Contains(e.Error(), "s3cr3t") {
			t.Errorf("an error shows the secret: %v", e)
		}
	}
}

// Without PAYSVC_DATABASE_URL the CLI finds the private cluster where the
// Makefile starts it, PAYSVC_PG_PORT included.
func TestDefaultDatabaseFollowsPGPort(t *testing.T) {
	c, err := fromEnv(nil)
	if err != nil || c.DatabaseURL != service.DefaultDatabaseURL {
		t.Errorf("default: %q, %v", c.DatabaseURL, err)
	}
	c, err = fromEnv(map[string]string{"PAYSVC_PG_PORT": "55499"})
	if want := "postgres://postgres@127.0.0.1:55499/paysvc?sslmode=disable"; err != nil || c.DatabaseURL != want {
		t.Errorf("PAYSVC_PG_PORT=55499: %q, %v; want %q", c.DatabaseURL, err, want)
	}
	c, err = fromEnv(map[string]string{"PAYSVC_PG_PORT": "55499", "PAYSVC_DATABASE_URL": "postgres://x@h/db?sslmode=disable"})
	if err != nil || c.DatabaseURL != "postgres://x@h/db?sslmode=disable" {
		t.Errorf("an explicit URL wins: %q, %v", c.DatabaseURL, err)
	}
	if _, err := fromEnv(map[string]string{"PAYSVC_PG_PORT": "port"}); err == nil || !strings.Contains(err.Error(), "PAYSVC_PG_PORT") {
		t.Errorf("PAYSVC_PG_PORT=port: err %v, want it named", err)
	}
}

func TestUnknownVariables(t *testing.T) {
	got := service.UnknownVariables([]string{
		"PAYSVC_KAFKA_SYNC_WRITE=true",     // a letter short
		"PAYSVC_DATABSE_URL=postgres://x",  // two letters swapped
		"PAYSVC_SOMETHING_ELSE_ENTIRELY=1", // nothing close
		"PAYSVC_DATABASE_URL=postgres://x", // known
		"PAYSVC_DARAJA_PASSKEY_FILE=/run/secrets/passkey", "PAYSVC_WEBHOOK_CA_FILE=/etc/ca.pem",
		"PAYSVC_TEST_DATABASE_URL=x", "PAYSVC_PG_PORT=55432", "PAYSVC_SECRET_KEY=x", "HOME=/root",
	})
	want := []service.Unknown{
		{Name: "PAYSVC_KAFKA_SYNC_WRITE", DidYouMean: "PAYSVC_KAFKA_SYNC_WRITES"},
		{Name: "PAYSVC_DATABSE_URL", DidYouMean: "PAYSVC_DATABASE_URL"},
		{Name: "PAYSVC_SOMETHING_ELSE_ENTIRELY"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("unknown = %+v\nwant      %+v", got, want)
	}
}

// Every PAYSVC_ name the README, the Makefile, the ops scripts and the compose
// file use is one paysvc knows, so none of them is ever warned about.
func TestKnownVariablesCoverTheRepository(t *testing.T) {
	known := service.KnownVariables()
	if !slices.Contains(known, "PAYSVC_WEBHOOK_CA_FILE") || slices.Contains(known, "PAYSVC_DATABASE_URL_FILE") {
		t.Errorf("known names: PAYSVC_WEBHOOK_CA_FILE is one, PAYSVC_DATABASE_URL_FILE only a form of one: %v", known)
	}
	name := regexp.MustCompile(`PAYSVC_[A-Z0-9_]*[A-Z0-9]`)
	files := []string{"../../../README.md", "../../../Makefile", "../../../docker-compose.yml"}
	scripts, _ := filepath.Glob("../../../ops/*/*.sh")
	for _, f := range append(files, scripts...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			if strings.HasPrefix(n, "PAYSVC_TEST_") {
				continue
			}
			if got := service.UnknownVariables([]string{n + "=x"}); len(got) > 0 && !familyOf(known, n) {
				t.Errorf("%s names %s, which paysvc does not know (service.KnownVariables)", f, n)
			}
		}
	}
}

// familyOf: n is a prefix the text uses for several known names
// ("PAYSVC_DARAJA_*").
func familyOf(known []string, n string) bool {
	return slices.ContainsFunc(known, func(k string) bool { return strings.HasPrefix(k, n+"_") })
}
