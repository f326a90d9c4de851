package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"paysvc/actors/values/money"
	"paysvc/cmd/paysvc/service/servicetest"
)

// quickstart returns the commands of README.md's quickstart, the shell block after
// "Then, in another terminal:", one command a string: comments dropped and
// continued lines joined, as a shell reads them.
func quickstart(t *testing.T, readme string) []string {
	t.Helper()
	_, after, ok := strings.Cut(readme, "Then, in another terminal:")
	if !ok {
		t.Fatal(`README.md has no "Then, in another terminal:" quickstart`)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("README.md's quickstart has no ```sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	comment := regexp.MustCompile(`(^|\s)#.*$`)
	var cmds []string
	cur := ""
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(comment.ReplaceAllString(line, ""))
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur += cont
			continue
		}
		cur += line
		if cur != "" {
			cmds = append(cmds, cur)
		}
		cur = ""
	}
	return cmds
}

// words splits a command as a shell does for the quoting the quickstart uses:
// single and double quotes, $NAME expanded outside single quotes.
func words(cmd string, vars map[string]string) []string {
	var out []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(cmd); i++ {
		c := cmd[i]
		switch {
		case c == '$' && quote != '\'':
			j := i + 1
			for j < len(cmd) && (cmd[j] == '_' || cmd[j] >= 'A' && cmd[j] <= 'Z' || cmd[j] >= 'a' && cmd[j] <= 'z' || cmd[j] >= '0' && cmd[j] <= '9') {
				j++
			}
			w.WriteString(vars[cmd[i+1:j]])
			i, in = j-1, true
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

// TestReadmeQuickstart runs README.md's quickstart as a newcomer would, in order,
// against a live service on a fresh database: the ids the README says to copy are
// copied from the answers before, and each step must answer as the README says.
// A command edited into one that does not work fails here.
func TestReadmeQuickstart(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := quickstart(t, string(b))
	svc := servicetest.Start(t, nil)
	env := envFor(svc.Schema)
	vars := map[string]string{}
	ids := map[string]string{} // what the README's <...> placeholders stand for
	var secret string
	done := map[string]bool{}
	for _, cmd := range cmds {
		t.Logf("$ %s", cmd)
		for k, v := range ids {
			cmd = strings.ReplaceAll(cmd, k, v)
		}
		switch {
		case strings.HasPrefix(cmd, "./bin/paysvc "):
			args := words(strings.TrimPrefix(cmd, "./bin/paysvc "), vars)
			r := runCLI(t, env, args...)
			if r.err != nil {
				t.Fatalf("%s: %v", cmd, r)
			}
			switch strings.Join(args[:2], " ") {
			case "merchant create":
				secret = decodeString(t, decodeOne(t, r.stdout, "merchant_id", "public_key", "secret_key")["secret_key"])
				done["merchant"] = true
			case "ledger check":
				var rep struct{ OK bool }
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !rep.OK {
					t.Fatalf("ledger check after the quickstart: %v", r)
				}
				done["ledger"] = true
			}
		case regexp.MustCompile(`^[A-Z]+=\S+$`).MatchString(cmd):
			name, _, _ := strings.Cut(cmd, "=")
			if secret == "" {
				t.Fatalf("%s: no secret key printed before it", cmd)
			}
			vars[name] = secret // "the secret_key printed above"
			done["sk"] = true
		case strings.HasPrefix(cmd, "curl "):
			args := words(cmd, vars)[1:]
			status, body := curl(t, svc.BaseURL, args)
			t.Logf("%d %s", status, body)
			checkStep(t, cmd, sentBody(args), status, body, ids, done)
		default:
			t.Fatalf("the quickstart runs %q, which this test does not know how to try", cmd)
		}
	}
	for _, step := range []string{"merchant", "sk", "list", "create", "deposit", "transfer", "ledger"} {
		if !done[step] {
			t.Errorf("the quickstart no longer does step %q (or it did not answer as expected)", step)
		}
	}
}

func decodeString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return s
}

// curl does what curl does with the flags the quickstart uses (-s, -XMETHOD, -H,
// -d), on the test service instead of localhost:8080.
func curl(t *testing.T, base string, args []string) (int, string) {
	t.Helper()
	method, url, body := "GET", "", ""
	var headers [][2]string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-s":
		case strings.HasPrefix(a, "-X"):
			method = strings.TrimPrefix(a, "-X")
		case a == "-H" && i+1 < len(args):
			i++
			k, v, _ := strings.Cut(args[i], ":")
			headers = append(headers, [2]string{k, strings.TrimSpace(v)})
		case a == "-d" && i+1 < len(args):
			i++
			body = args[i]
			if method == "GET" {
				method = "POST"
			}
		case strings.HasPrefix(a, "localhost:8080/"):
			url = base + strings.TrimPrefix(a, "localhost:8080")
		default:
			t.Fatalf("curl argument %q: this test does not know it", a)
		}
	}
	if url == "" {
		t.Fatalf("curl %v names no localhost:8080 URL", args)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	if body != "" {
		// curl -d sends application/x-www-form-urlencoded; the API reads JSON whatever the type.
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// checkStep holds a curl step's answer to what the quickstart says of it, and
// notes the ids the next steps copy: the settlement wallet the merchant starts
// with, and the Ops wallet the quickstart creates.
func checkStep(t *testing.T, cmd, sent string, status int, body string, ids map[string]string, done map[string]bool) {
	t.Helper()
	if strings.Contains(cmd, "<") {
		t.Fatalf("%s: a placeholder no earlier step filled in", cmd)
	}
	type wallet struct {
		WalletID         string       `json:"wallet_id"`
		WalletType       string       `json:"wallet_type"`
		Label            string       `json:"label"`
		CurrentBalance   money.Amount `json:"current_balance"`
		AvailableBalance money.Amount `json:"available_balance"`
	}
	var asked struct {
		Amount money.Amount `json:"amount"`
	}
	if sent != "" {
		if err := json.Unmarshal([]byte(sent), &asked); err != nil {
			t.Fatalf("%s: its body %s: %v", cmd, sent, err)
		}
	}
	decode := func(v any) {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: answer %s: %v", cmd, body, err)
		}
	}
	path := regexp.MustCompile(`localhost:8080(\S*)`).FindStringSubmatch(cmd)[1]
	post := strings.Contains(cmd, "-XPOST")
	switch {
	case !post && path == "/api/v1/wallets/":
		var l struct{ Results []wallet }
		decode(&l)
		for _, w := range l.Results {
			if w.WalletType == "SETTLEMENT" {
				ids["<settlement id>"] = w.WalletID
			}
		}
		if status != http.StatusOK || ids["<settlement id>"] == "" {
			t.Fatalf("%s: %d %s, want 200 listing the settlement wallet", cmd, status, body)
		}
		done["list"] = true
	case post && path == "/api/v1/wallets/":
		var w wallet
		decode(&w)
		if status != http.StatusCreated || w.WalletType != "WORKING" || !w.CurrentBalance.IsZero() {
			t.Fatalf("%s: %d %s, want 201 and an empty working wallet", cmd, status, body)
		}
		ids["<ops id>"] = w.WalletID
		done["create"] = true
	case post && strings.HasSuffix(path, "/deposit/"):
		var w wallet
		decode(&w)
		// The settlement wallet starts empty: it then holds what was deposited.
		if status != http.StatusOK || w.WalletID != ids["<settlement id>"] || !w.CurrentBalance.Equal(asked.Amount) ||
			!w.AvailableBalance.Equal(asked.Amount) {
			t.Fatalf("%s: %d %s, want 200 and the settlement wallet holding %s", cmd, status, body, asked.Amount)
		}
		ids["deposited"] = asked.Amount.String()
		done["deposit"] = true
	case post && strings.HasSuffix(path, "/intra_transfer/"):
		var tr struct{ Origin, Destination wallet }
		decode(&tr)
		left := money.MustParse(ids["deposited"]).Sub(asked.Amount)
		if status != http.StatusOK || tr.Origin.WalletID != ids["<settlement id>"] || !tr.Origin.CurrentBalance.Equal(left) ||
			tr.Destination.WalletID != ids["<ops id>"] || !tr.Destination.CurrentBalance.Equal(asked.Amount) {
			t.Fatalf("%s: %d %s, want 200, the settlement wallet at %s and Ops at %s", cmd, status, body, left, asked.Amount)
		}
		done["transfer"] = true
	default:
		t.Fatalf("%s: the quickstart calls %s, which this test does not know how to check", cmd, path)
	}
}

// sentBody is the -d argument of a curl command's arguments.
func sentBody(args []string) string {
	for i, a := range args {
		if a == "-d" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
