package service_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"paysvc/cmd/paysvc/service"
)

func TestDBPools(t *testing.T) {
	cases := []struct {
		roles           []string
		maxConns        int
		main, idem, sum int
	}{
		{service.AllRoles, 0, 74, 8, 82},
		{[]string{service.RoleAPI}, 0, 28, 8, 36},
		{[]string{service.RoleEngine}, 0, 28, 0, 28},
		{[]string{service.RoleRelay, service.RoleRails}, 0, 18, 0, 18},
		{service.AllRoles, 20, 15, 5, 20},
		{[]string{service.RoleAPI}, 4, 2, 2, 4},
		{[]string{service.RoleDispatcher}, 3, 3, 0, 3},
	}
	for _, c := range cases {
		cfg := service.Config{Roles: c.roles, DBMaxConns: c.maxConns}
		main, idem := cfg.DBPools()
		if main != c.main || idem != c.idem || cfg.DBConns() != c.sum || main+idem != c.sum {
			t.Errorf("roles %v, PAYSVC_DB_MAX_CONNS=%d: pools %d+%d of %d, want %d+%d of %d",
				c.roles, c.maxConns, main, idem, cfg.DBConns(), c.main, c.idem, c.sum)
		}
	}
	for env, want := range map[string]string{"3": "too few", "-1": "too few", "many": "not a number"} {
		_, err := fromEnv(map[string]string{"PAYSVC_DB_MAX_CONNS": env})
		if err == nil || !strings.Contains(err.Error(), "PAYSVC_DB_MAX_CONNS") || !strings.Contains(err.Error(), want) {
			t.Errorf("PAYSVC_DB_MAX_CONNS=%s: err %v, want %q naming the variable", env, err, want)
		}
	}
}

// The compose file's PostgreSQL has room for all its paysvc processes at their
// role-sized pools, the admin profile's and a few sessions of its own.
func TestComposeSizesPostgres(t *testing.T) {
	b, err := os.ReadFile("../../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]struct {
			Command  []string `yaml:"command"`
			Profiles []string `yaml:"profiles"`
			Image    string   `yaml:"image"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	need, processes := 0, 0
	for name, s := range doc.Services {
		if len(s.Command) >= 3 && s.Command[0] == "serve" && s.Command[1] == "--roles" {
			need += service.Config{Roles: strings.Split(s.Command[2], ",")}.DBConns()
			processes++
		} else if name == "admin" {
			need += 40 // storage.Open's pool, for one admin command at a time
		}
	}
	const sessions = 10 // psql, pg_dump, the superuser's reserved three
	need += sessions
	m := regexp.MustCompile(`max_connections=(\d+)`).FindStringSubmatch(strings.Join(doc.Services["postgres"].Command, " "))
	if m == nil {
		t.Fatalf("compose's postgres sets no max_connections (PostgreSQL's default 100 is less than the %d its %d processes may open)", need, processes)
	}
	if have, _ := strconv.Atoi(m[1]); have < need {
		t.Errorf("compose's postgres max_connections=%d, its %d paysvc processes, the admin command and %d sessions may open %d", have, processes, sessions, need)
	}
	if processes < 10 {
		t.Errorf("found %d paysvc processes in compose; the test reads the wrong shape", processes)
	}
}
