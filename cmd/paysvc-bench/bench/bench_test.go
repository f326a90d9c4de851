package bench

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPercentile_NearestRank(t *testing.T) {
	t.Parallel()
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(100-i) * time.Millisecond // unsorted on purpose
	}
	s := summarize(d)
	if s.N != 100 || s.P50 != 50*time.Millisecond || s.P95 != 95*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Fatalf("summary = %+v", s)
	}
	if got := percentile([]time.Duration{7}, 99); got != 7 {
		t.Fatalf("one sample: %v", got)
	}
	if got := summarize(nil); got.N != 0 {
		t.Fatalf("empty: %+v", got)
	}
}

const scrape = `# HELP paysvc_engine_batch_size_commands Commands per committed batch transaction.
# TYPE paysvc_engine_batch_size_commands histogram
paysvc_engine_batch_size_commands_bucket{le="1"} 2
paysvc_engine_batch_size_commands_bucket{le="2"} 5
paysvc_engine_batch_size_commands_bucket{le="4"} 10
paysvc_engine_batch_size_commands_bucket{le="+Inf"} 10
paysvc_engine_batch_size_commands_sum 27
paysvc_engine_batch_size_commands_count 10
paysvc_http_request_duration_seconds_sum{method="POST",route="/api/v1/wallets/:wallet_id/intra_transfer",status="200"} 1.5
paysvc_http_request_duration_seconds_count{method="POST",route="/api/v1/wallets/:wallet_id/intra_transfer",status="200"} 300
paysvc_http_request_duration_seconds_sum{method="POST",route="/api/v1/wallets/:wallet_id/intra_transfer",status="400"} 9
paysvc_http_request_duration_seconds_count{method="POST",route="/api/v1/wallets/:wallet_id/intra_transfer",status="400"} 1
process_cpu_seconds_total 12.5
`

func TestMetrics_HistogramDiffAndQuantile(t *testing.T) {
	t.Parallel()
	after, err := parseMetrics(strings.NewReader(scrape))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := parseMetrics(strings.NewReader(`paysvc_engine_batch_size_commands_bucket{le="1"} 1
paysvc_engine_batch_size_commands_bucket{le="2"} 1
paysvc_engine_batch_size_commands_bucket{le="4"} 2
paysvc_engine_batch_size_commands_bucket{le="+Inf"} 2
paysvc_engine_batch_size_commands_sum 5
paysvc_engine_batch_size_commands_count 2
`))
	h := after.histogram("paysvc_engine_batch_size_commands").minus(before.histogram("paysvc_engine_batch_size_commands"))
	if h.Count != 8 || h.Sum != 22 || h.mean() != 2.75 {
		t.Fatalf("diff = %+v", h)
	}
	if q := h.quantile(0.5); q != 2 { // 1 of 8 <= 1, 4 of 8 <= 2: the 4th of 8 is the median
		t.Fatalf("p50 bound = %v", q)
	}
	http := after.histogram("paysvc_http_request_duration_seconds", transferRoute, `status="200"`)
	if http.Count != 300 || http.Sum != 1.5 {
		t.Fatalf("labelled histogram = %+v", http)
	}
	if got := after.sum("process_cpu_seconds_total"); got != 12.5 {
		t.Fatalf("cpu = %v", got)
	}
}

func TestParseProcStat_CommandWithSpaces(t *testing.T) {
	t.Parallel()
	line := "1234 (postgres: a b) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0"
	got, err := parseProcStat(line)
	if err != nil || got != 3 {
		t.Fatalf("got %v, %v; want 3 s (300 ticks)", got, err)
	}
}

func TestPick_Spread_TwoDistinctWalletsOfOneMerchant(t *testing.T) {
	t.Parallel()
	s := &scenarioSetup{Hot: -1}
	owner := map[int]*merchant{}
	for m := 0; m < 3; m++ {
		mm := &merchant{ID: string(rune('A' + m))}
		for w := 0; w < 2; w++ {
			idx := m*2 + w
			mm.Wallets = append(mm.Wallets, idx)
			owner[idx] = mm
		}
		s.Merchants = append(s.Merchants, mm)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[[2]int]bool{}
	for i := 0; i < 2000; i++ {
		m, a, b := s.pick(rng)
		if a == b || owner[a] != m || owner[b] != m {
			t.Fatalf("pick = %s %d %d", m.ID, a, b)
		}
		seen[[2]int{a, b}] = true
	}
	if len(seen) != 6 { // both directions of each merchant's one pair
		t.Fatalf("pairs seen: %v", seen)
	}
}

func TestPick_Hot_AlwaysCreditsTheHotWallet(t *testing.T) {
	t.Parallel()
	m := &merchant{ID: "M"}
	s := &scenarioSetup{Merchants: []*merchant{m}, Hot: 9, Sources: []int{1, 2, 3}}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 100; i++ {
		_, src, dst := s.pick(rng)
		if dst != 9 || !slices.Contains(s.Sources, src) {
			t.Fatalf("pick = %d -> %d", src, dst)
		}
	}
}

func TestTransferBody_IsTheAPIsJSON(t *testing.T) {
	t.Parallel()
	var v map[string]string
	if err := json.Unmarshal(transferBody("ABC123", 105), &v); err != nil {
		t.Fatal(err)
	}
	if v["wallet_id"] != "ABC123" || v["amount"] != "1.05" || v["narrative"] != "bench" {
		t.Fatalf("body = %v", v)
	}
	for c, want := range map[int64]string{0: "0.00", 7: "0.07", 100: "1.00", 123456: "1234.56", -5: "-0.05"} {
		if got := centsString(c); got != want {
			t.Fatalf("centsString(%d) = %q, want %q", c, got, want)
		}
	}
}

func TestParseCents(t *testing.T) {
	t.Parallel()
	if c, err := parseCents("1000000.00"); err != nil || c != 100000000 {
		t.Fatalf("got %d, %v", c, err)
	}
	for _, bad := range []string{"", "-1.00", "0", "1.005", "abc"} {
		if _, err := parseCents(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func TestWithEnv_OverridesOnlyWhatIsSet(t *testing.T) {
	t.Parallel()
	got := withEnv([]string{"A=1", "PAYSVC_HTTP_ADDR=x", "PAYSVC_COMMAND_PARTITIONS=16"}, map[string]string{"PAYSVC_HTTP_ADDR": "127.0.0.1:1"})
	slices.Sort(got)
	want := []string{"A=1", "PAYSVC_COMMAND_PARTITIONS=16", "PAYSVC_HTTP_ADDR=127.0.0.1:1"}
	if !slices.Equal(got, want) {
		t.Fatalf("env = %v", got)
	}
}

func TestDatabaseURL_ReplacesTheName(t *testing.T) {
	t.Parallel()
	got, err := databaseURL("postgres://postgres@127.0.0.1:55432/paysvc?sslmode=disable", "paysvc_bench_1")
	if err != nil || got != "postgres://postgres@127.0.0.1:55432/paysvc_bench_1?sslmode=disable" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestRefusedBeforeIssue_OnlyTheOverloadedRefusal(t *testing.T) {
	t.Parallel()
	overloaded := []byte(`{"type":"server_error","detail":"Too many requests in flight; retry shortly.","errors":[{"code":"overloaded","detail":"x","attr":null}],"request_id":"r"}`)
	if !refusedBeforeIssue(503, overloaded) {
		t.Fatal("overloaded 503 not recognised")
	}
	if refusedBeforeIssue(503, []byte(`{"errors":[{"code":"unavailable"}]}`)) || refusedBeforeIssue(504, overloaded) {
		t.Fatal("an unknown outcome taken for a refusal")
	}
}

func TestSTKPhone_NeverAMagicNumber(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	seen := map[string]bool{}
	for i := 0; i < 200000; i++ {
		p := stkPhone(rng)
		if len(p) != 12 || !strings.HasPrefix(p, "2547") || strings.Trim(p, "0123456789") != "" {
			t.Fatalf("phone %q is not 2547XXXXXXXX", p)
		}
		if tail := p[8:]; tail >= "0001" && tail <= "0006" {
			t.Fatalf("phone %q ends in a magic failure suffix", p)
		}
		seen[p] = true
	}
	if len(seen) < 199000 {
		t.Fatalf("only %d distinct phones of 200000", len(seen))
	}
}

func TestSTKBody_IsTheAPIsJSON(t *testing.T) {
	t.Parallel()
	var v map[string]string
	if err := json.Unmarshal(stkBody("254712345678"), &v); err != nil {
		t.Fatal(err)
	}
	if len(v) != 3 || v["phone_number"] != "254712345678" || v["amount"] != "100" || v["api_ref"] != "bench" {
		t.Fatalf("body = %v", v)
	}
}

func TestSTKChildEnv_FastSimulatorUnlessSet(t *testing.T) {
	t.Parallel()
	got := stkChildEnv(func(string) string { return "" })
	if len(got) != 2 || got["PAYSVC_SIM_ACCEPT_DELAY"] != "5ms" || got["PAYSVC_SIM_FINAL_DELAY"] != "10ms" {
		t.Fatalf("env = %v", got)
	}
	got = stkChildEnv(func(k string) string {
		if k == "PAYSVC_SIM_FINAL_DELAY" {
			return "1s"
		}
		return ""
	})
	if len(got) != 1 || got["PAYSVC_SIM_ACCEPT_DELAY"] != "5ms" {
		t.Fatalf("a caller's PAYSVC_SIM_FINAL_DELAY overridden: %v", got)
	}
}

func TestScenarios_STKIsKnownButNotDefault(t *testing.T) {
	t.Parallel()
	if slices.Contains(Scenarios, ScenarioSTK) {
		t.Fatal("stk-collect is in the default run")
	}
	if !slices.Contains(KnownScenarios(), ScenarioSTK) || !strings.Contains(ScenarioHelp(), ScenarioSTK) {
		t.Fatal("stk-collect is not selectable or not in the help")
	}
	valid := func(s ...string) error {
		o := Options{Scenarios: s, Merchants: 8, Wallets: 16, HotSources: 64, Concurrency: 64, Duration: time.Second,
			BaselineConns: 16, Deposit: "1.00", DatabaseURL: "postgres://x/y"}
		return o.Validate()
	}
	if err := valid(ScenarioSTK); err != nil {
		t.Fatalf("stk-collect refused: %v", err)
	}
	if err := valid(ScenarioSpread, ScenarioSTK, ScenarioHot); err != nil {
		t.Fatalf("mixed run refused: %v", err)
	}
	if err := valid("stk"); err == nil || !strings.Contains(err.Error(), ScenarioSTK) {
		t.Fatalf("unknown scenario: %v", err)
	}
	if err := valid(ScenarioSTK, ScenarioSTK); err == nil {
		t.Fatal("a scenario named twice accepted")
	}
}
