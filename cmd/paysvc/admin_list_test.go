package main

import (
	"encoding/json"
	"strings"
	"testing"

	"paysvc/storage/storagetest"
)

// merchant list and key list show what an operator needs to find a merchant or
// a key, and never a secret.
func TestMerchantAndKeyList(t *testing.T) {
	t.Parallel()
	s := storagetest.New(t)
	env := envFor(s)
	r := runCLI(t, env, "merchant", "list")
	if r.err != nil || strings.TrimSpace(r.stdout) != `{"merchants":[]}` && !strings.Contains(r.stdout, `"merchants": []`) {
		t.Fatalf("an empty list: %v", r)
	}
	created := map[string]string{}
	for _, c := range []struct{ name, env string }{{"Acme", "sandbox"}, {"Zed", "live"}} {
		r := runCLI(t, env, "merchant", "create", "--name", c.name, "--environment", c.env)
		if r.err != nil {
			t.Fatalf("merchant create: %v", r)
		}
		obj := decodeOne(t, r.stdout, "merchant_id", "public_key", "secret_key")
		created[c.name] = str(t, obj, "merchant_id")
		created[c.name+"/secret"] = str(t, obj, "secret_key")
	}
	var list struct {
		Merchants []struct {
			MerchantID  string `json:"merchant_id"`
			Name        string `json:"name"`
			Environment string `json:"environment"`
			Enabled     bool   `json:"enabled"`
		} `json:"merchants"`
	}
	r = runCLI(t, env, "merchant", "list", "--environment", "live")
	if r.err != nil || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("merchant list --environment live: %v", r)
	}
	if len(list.Merchants) != 1 || list.Merchants[0].MerchantID != created["Zed"] || list.Merchants[0].Name != "Zed" || !list.Merchants[0].Enabled {
		t.Errorf("live merchants = %+v, want Zed alone", list.Merchants)
	}
	if r := runCLI(t, env, "merchant", "list"); r.err != nil || !strings.Contains(r.stdout, created["Acme"]) || !strings.Contains(r.stdout, created["Zed"]) {
		t.Errorf("merchant list: %v; want both", r)
	}

	if r := runCLI(t, env, "key", "create", "--merchant", created["Acme"], "--permissions", "view_wallets"); r.err != nil {
		t.Fatalf("key create: %v", r)
	}
	r = runCLI(t, env, "key", "list", "--merchant", created["Acme"])
	if r.err != nil {
		t.Fatalf("key list: %v", r)
	}
	var keys struct {
		Keys []struct {
			KeyID        string   `json:"key_id"`
			Kind         string   `json:"kind"`
			Unrestricted bool     `json:"unrestricted"`
			Permissions  []string `json:"permissions"`
			RevokedAt    *string  `json:"revoked_at"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &keys); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, k := range keys.Keys {
		kinds[k.Kind]++
		if k.Kind == "secret" && !k.Unrestricted && (len(k.Permissions) != 1 || k.Permissions[0] != "view_wallets") {
			t.Errorf("restricted key %+v, want view_wallets alone", k)
		}
	}
	if kinds["public"] != 1 || kinds["secret"] != 2 {
		t.Errorf("keys by kind %v, want the public key, the main secret key and the restricted one", kinds)
	}
	if secret := created["Acme/secret"]; strings.Contains(r.stdout, secret[len(secret)-20:]) || strings.Contains(r.stdout, "hash") {
		t.Errorf("key list shows a secret: %s", r.stdout)
	}
	if r := runCLI(t, env, "key", "list", "--merchant", "MNOPE"); r.err == nil || !strings.Contains(r.err.Error(), "not found") {
		t.Errorf("key list of an unknown merchant: %v", r)
	}
}
