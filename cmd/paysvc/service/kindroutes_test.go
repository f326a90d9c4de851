package service_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kgo"

	"paysvc/actors/engine"
	"paysvc/api"
	"paysvc/api/mount"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// A kind that exists only in this test, written as a new aggregate is
// (docs/adr/0007-one-aggregate-contract.md, "How to add an aggregate"): its
// package (jarAggregate: the engine.Kind and its Routes), its migration
// (jarMigration: table, paysvc_apply_testjar, batch_aggregates) and its line in
// the list (Config.Aggregates, as service.Aggregates would hold it). A jar holds
// marbles, at most jarCapacity; filling it is a command, which emits an event.
const jarCapacity = 100

type jar struct {
	ID      string `json:"id"`
	Label   string `json:"label"`
	Marbles int64  `json:"marbles"`
	Fills   int    `json:"fills"`
}

type jarFill struct {
	Jar     string `json:"jar"`
	Label   string `json:"label"`
	Marbles int64  `json:"marbles"`
}

const cmdJarFill = "testjar.fill"

var jarIDPattern = regexp.MustCompile(`^[a-z0-9_-]{1,40}$`)

func jarAggregate() service.Aggregate {
	return service.Aggregate{
		Kind: engine.Kind{
			Name:     "testjar",
			Commands: map[string]func() any{cmdJarFill: func() any { return &jarFill{} }},
			IDs:      func(p any) []string { return []string{p.(*jarFill).Jar} },
			Load:     loadJars,
			Apply: func(tx *engine.Tx, c *topics.Command, payload any) (topics.Reply, error) {
				in := payload.(*jarFill)
				j := jar{ID: in.Jar}
				if s, ok := tx.Get(in.Jar); ok {
					j = s.(jar)
				}
				if j.Marbles+in.Marbles > jarCapacity {
					return engine.Refuse("jar_full", "A jar holds at most 100 marbles.", "marbles"), nil
				}
				j.Marbles, j.Fills = j.Marbles+in.Marbles, j.Fills+1
				if in.Label != "" {
					j.Label = in.Label
				}
				tx.Put(j.ID, j)
				tx.Event(topics.ReversalEvent, j.ID, j)
				b, err := json.Marshal(j)
				return topics.Reply{Result: b}, err
			},
		},
		Routes: func(m mount.Mount) {
			m.Refusals(map[string]int{"jar_full": http.StatusConflict})
			m.Command(http.MethodPost, "/testjars/:jar_id/fill", mount.Access{Permission: api.PermAddWallets, What: "fill jars"},
				func(r mount.Request) (mount.Command, error) {
					id := r.Param("jar_id")
					if !jarIDPattern.MatchString(id) {
						return mount.Command{}, &mount.NotFound{Detail: "Jar not found."}
					}
					var in jarFill
					if err := r.Decode(&in); err != nil {
						return mount.Command{}, err
					}
					if in.Marbles < 1 || in.Marbles > jarCapacity {
						return mount.Command{}, &mount.Invalid{Attr: "marbles", Detail: "marbles must be from 1 to 100."}
					}
					in.Jar = id
					return mount.Command{Type: cmdJarFill, Payload: in}, nil
				})
			m.Get("/testjars/:jar_id", mount.Access{Permission: api.PermViewWallets, What: "read jars"}, "jar_id",
				func(state any) any { return state })
		},
	}
}

func loadJars(ctx context.Context, q sqlx.QueryerContext, merchant string, ids []string) ([]engine.Snapshot, error) {
	rows, err := q.QueryxContext(ctx, `SELECT id, version, state FROM testjars WHERE merchant_id = $1 AND id = ANY($2)`, merchant, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.Snapshot
	for rows.Next() {
		var s engine.Snapshot
		var raw []byte
		var j jar
		if err := rows.Scan(&s.ID, &s.Version, &raw); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, err
		}
		s.State = j
		out = append(out, s)
	}
	return out, rows.Err()
}

const jarMigration = `
CREATE TABLE testjars (merchant_id text NOT NULL, id text NOT NULL, version bigint NOT NULL, state jsonb NOT NULL,
                       PRIMARY KEY (merchant_id, id));
CREATE FUNCTION paysvc_apply_testjar(p_rows jsonb, p_at timestamptz) RETURNS void LANGUAGE plpgsql AS $$
DECLARE n bigint; r record;
BEGIN
    FOR r IN SELECT * FROM jsonb_to_recordset(p_rows) AS x(id text, merchant_id text, prev bigint, version bigint, state jsonb) LOOP
        IF r.prev = 0 THEN
            INSERT INTO testjars VALUES (r.merchant_id, r.id, r.version, r.state);
        ELSE
            UPDATE testjars SET version = r.version, state = r.state WHERE merchant_id = r.merchant_id AND id = r.id AND version = r.prev;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF n <> 1 THEN RAISE EXCEPTION 'stale jar' USING ERRCODE = 'PS002'; END IF;
        END IF;
    END LOOP;
END $$;
INSERT INTO batch_aggregates (kind, description) VALUES ('testjar', 'service tests: a kind with its own routes');`

// TestAggregateBringsItsRoutes drives the test-only kind through HTTP end to end,
// on a whole service (PostgreSQL, kfake, every role): its routes were mounted from
// the list alone, and behave as built-in ones do (permission, Idempotency-Key,
// reply mapping, merchant scoping); its command's event reaches its topic and its
// commit function wrote its row.
func TestAggregateBringsItsRoutes(t *testing.T) {
	t.Parallel()
	schema := storagetest.New(t)
	if _, err := schema.DB.Exec(jarMigration); err != nil {
		t.Fatal(err)
	}
	cfg := servicetest.Config(t, schema)
	cfg.Aggregates = append(service.Aggregates(), jarAggregate())
	svc, err := service.Start(context.Background(), cfg, servicetest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	env := &servicetest.Env{T: t, Svc: svc, Schema: schema, BaseURL: "http://" + svc.Addr, Config: cfg}
	m := env.Merchant("Jars")
	auth := servicetest.Bearer(m.SecretKey)
	fill := func(id string, body any, headers ...string) servicetest.Response {
		return env.Do("POST", "/api/v1/testjars/"+id+"/fill", body, append(slices.Clone(auth), headers...)...)
	}
	stored := func(id string) (version int64, j jar) {
		t.Helper()
		var raw []byte
		if err := schema.DB.QueryRow(`SELECT version, state FROM testjars WHERE merchant_id = $1 AND id = $2`, m.MerchantID, id).
			Scan(&version, &raw); err != nil {
			t.Fatalf("jar %s: %v", id, err)
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			t.Fatal(err)
		}
		return version, j
	}
	readJar := func(r servicetest.Response) jar {
		t.Helper()
		var j jar
		r.JSON(t, &j)
		return j
	}

	// A fill creates the jar through the command, answered with its reply.
	first := fill("blue", map[string]any{"marbles": 30, "label": "Blue"}, "Idempotency-Key", "fill-blue-1")
	if first.Status != http.StatusOK {
		t.Fatalf("fill: %d %s", first.Status, first.Body)
	}
	if j := readJar(first); j.ID != "blue" || j.Marbles != 30 || j.Fills != 1 || j.Label != "Blue" {
		t.Fatalf("fill answered %+v", j)
	}
	// The same Idempotency-Key replays the first answer and applies nothing.
	replay := fill("blue", map[string]any{"marbles": 30, "label": "Blue"}, "Idempotency-Key", "fill-blue-1")
	if replay.Status != http.StatusOK || string(replay.Body) != string(first.Body) {
		t.Fatalf("replay: %d %s, want the first answer %s", replay.Status, replay.Body, first.Body)
	}
	// The commit function (paysvc_apply_testjar) wrote the row, once.
	if v, j := stored("blue"); v != 1 || j.Marbles != 30 || j.Fills != 1 {
		t.Fatalf("stored jar after a fill and its replay: version %d %+v", v, j)
	}
	// GET reads it with the kind's Load.
	if r := env.Do("GET", "/api/v1/testjars/blue", nil, auth...); r.Status != http.StatusOK || readJar(r) != (jar{ID: "blue", Label: "Blue", Marbles: 30, Fills: 1}) {
		t.Fatalf("GET: %d %s", r.Status, r.Body)
	}

	// A refused command answers the kind's code mapped to HTTP, and changes nothing.
	over := fill("blue", map[string]any{"marbles": 80})
	if body := over.Map(t); over.Status != http.StatusConflict || body["errors"].([]any)[0].(map[string]any)["code"] != "jar_full" {
		t.Fatalf("overfill: %d %s", over.Status, over.Body)
	}
	if v, j := stored("blue"); v != 1 || j.Marbles != 30 {
		t.Fatalf("a refused fill changed the jar: version %d %+v", v, j)
	}
	// What decode refuses is the API's 400 naming the field, and issues nothing.
	if r := fill("blue", map[string]any{"marbles": 0}); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"attr":"marbles"`) {
		t.Fatalf("marbles 0: %d %s", r.Status, r.Body)
	}
	if r := fill("blue", map[string]any{"marbles": "many"}); r.Status != http.StatusBadRequest {
		t.Fatalf("marbles of the wrong type: %d %s", r.Status, r.Body)
	}
	if r := env.Do("GET", "/api/v1/testjars/green", nil, auth...); r.Status != http.StatusNotFound {
		t.Fatalf("GET of a missing jar: %d %s", r.Status, r.Body)
	}

	// Credentials and permissions are the route table's: no key is 401, a key
	// without the route's permission 403, and another merchant's jar is a 404.
	if r := env.Do("GET", "/api/v1/testjars/blue", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("GET without a key: %d %s", r.Status, r.Body)
	}
	viewer := servicetest.Bearer(env.Key(m.MerchantID, api.PermViewWallets))
	if r := env.Do("POST", "/api/v1/testjars/blue/fill", map[string]any{"marbles": 1}, viewer...); r.Status != http.StatusForbidden ||
		!strings.Contains(string(r.Body), api.PermAddWallets) {
		t.Fatalf("fill with a view-only key: %d %s", r.Status, r.Body)
	}
	if r := env.Do("GET", "/api/v1/testjars/blue", nil, viewer...); r.Status != http.StatusOK {
		t.Fatalf("GET with a view key: %d %s", r.Status, r.Body)
	}
	other := env.Merchant("Other jars")
	if r := env.Do("GET", "/api/v1/testjars/blue", nil, servicetest.Bearer(other.SecretKey)...); r.Status != http.StatusNotFound {
		t.Fatalf("another merchant's jar: %d %s", r.Status, r.Body)
	}

	// A second fill, so that the events up to its own are all there are.
	if r := fill("blue", map[string]any{"marbles": 5}); r.Status != http.StatusOK || readJar(r).Marbles != 35 {
		t.Fatalf("second fill: %d %s", r.Status, r.Body)
	}
	if v, j := stored("blue"); v != 2 || j.Marbles != 35 || j.Fills != 2 {
		t.Fatalf("stored jar after the second fill: version %d %+v", v, j)
	}
	// The relay published each applied fill's event, once, in order: the replay
	// and the refusals emitted none.
	cl, err := kgo.NewClient(kgo.SeedBrokers(svc.Brokers...), kgo.ConsumeTopics(env.Topic(topics.EventTopics[topics.ReversalEvent])),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seen []int64
	for (len(seen) == 0 || seen[len(seen)-1] != 35) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			var ev topics.Event
			var j jar
			if json.Unmarshal(rec.Value, &ev) != nil || ev.MerchantID != m.MerchantID || ev.Key != "blue" {
				return
			}
			if err := json.Unmarshal(ev.Payload, &j); err != nil {
				t.Errorf("event payload: %v", err)
			}
			seen = append(seen, j.Marbles)
		})
	}
	if !slices.Equal(seen, []int64{30, 35}) {
		t.Fatalf("the jar's events carried %v marbles, want [30 35]", seen)
	}
}

// TestAggregateRoutesAreInTheRouteTable: a kind's routes are in the API's route
// table (Routes, Echo's router, the OpenAPI description), so the drift tests
// (api TestOpenAPICoversEveryRoute, TestSecurityDocListsEveryRoute) would see
// them. Those tests build the API without the list; the production list brings
// no routes, and this test fails the day one of its kinds does and is not
// described (operations.yaml; docs/security.md's route table).
func TestAggregateRoutesAreInTheRouteTable(t *testing.T) {
	t.Parallel()
	build := func(list []service.Aggregate) *api.Server {
		return api.New(api.Config{PublicBaseURL: "http://localhost"},
			api.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Kinds: service.KindRoutes(list)})
	}
	bare := api.New(api.Config{PublicBaseURL: "http://localhost"}, api.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	production := build(service.Aggregates())
	if len(production.Routes()) != len(bare.Routes()) {
		// A kind of the list brings routes: they must be described like any other.
		for _, p := range production.OpenAPIProblems() {
			t.Errorf("openapi: %s", p)
		}
		doc, err := os.ReadFile("../../../docs/security.md")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range production.Routes() {
			if !slices.Contains(bare.Routes(), r) && !strings.Contains(string(doc), "`"+r.Method+" "+r.Path+"`") {
				t.Errorf("docs/security.md: route `%s %s` of an aggregate is in no row of the route table", r.Method, r.Path)
			}
		}
	}

	withJar := build(append(service.Aggregates(), jarAggregate()))
	want := map[string]string{"POST /api/v1/testjars/:jar_id/fill": api.PermAddWallets, "GET /api/v1/testjars/:jar_id": api.PermViewWallets}
	for _, r := range withJar.Routes() {
		if perm, ok := want[r.Method+" "+r.Path]; ok {
			if r.Permission != perm || r.Access != "secret key" {
				t.Errorf("%s %s: access %q permission %q, want a secret key with %q", r.Method, r.Path, r.Access, r.Permission, perm)
			}
			delete(want, r.Method+" "+r.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("the jar's routes are not in the route table: %v", want)
	}
	if got := len(withJar.Routes()) - len(bare.Routes()); got != 2 {
		t.Errorf("the jar added %d routes, want 2", got)
	}
	// The description sees them too: the test-only kind has no entry in
	// operations.yaml, which is exactly what the coverage test reports.
	undescribed := 0
	for _, p := range withJar.OpenAPIProblems() {
		if strings.Contains(p, "/testjars/") && strings.Contains(p, "is served but has no entry") {
			undescribed++
		}
	}
	if undescribed != 2 {
		t.Errorf("openapi problems of the jar's routes: %v", withJar.OpenAPIProblems())
	}
}
