package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"paysvc/actors/values/waittest"
	"paysvc/cmd/paysvc/service"
	"paysvc/cmd/paysvc/service/servicetest"
	"paysvc/storage/storagetest"
	"paysvc/topics"
)

// readyDoc is the /readyz body.
type readyDoc struct {
	Status string
	Checks map[string]struct {
		OK              bool
		Reason          string
		Owned, Assigned *int
	}
}

// probe GETs an operator endpoint and decodes its JSON.
func probe(t *testing.T, adminAddr, path string) (int, readyDoc, string) {
	t.Helper()
	resp, err := http.Get("http://" + adminAddr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var d readyDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not JSON: %v: %s", path, err, b)
	}
	return resp.StatusCode, d, string(b)
}

// eventually polls /readyz until want says yes, or fails after 30 s.
func eventually(t *testing.T, adminAddr, what string, want func(int, readyDoc) bool) readyDoc {
	t.Helper()
	var last readyDoc
	waittest.Eventually(t, 30*time.Second, func() (bool, string) {
		status, d, body := probe(t, adminAddr, "/readyz")
		last = d
		return want(status, d), fmt.Sprintf("%s: /readyz never did; last %d %s", what, status, body)
	})
	return last
}

// /readyz answers 200 only when the instance can do its roles' work: the database
// and the broker answer, and an engine holds the partitions the group gave it.
// /livez does not depend on either.
func TestReadiness(t *testing.T) {
	t.Parallel()

	t.Run("AllWell", func(t *testing.T) {
		t.Parallel()
		env := servicetest.Start(t, nil)
		d := eventually(t, env.Svc.AdminAddr, "a healthy service", func(s int, _ readyDoc) bool { return s == 200 })
		if d.Status != "ready" {
			t.Fatalf("status %q", d.Status)
		}
		for _, name := range []string{"database", "broker", "engine"} {
			if c, ok := d.Checks[name]; !ok || !c.OK {
				t.Errorf("check %s: %+v", name, c)
			}
		}
		if e := d.Checks["engine"]; e.Owned == nil || *e.Owned != int(env.Config.CommandPartitions) {
			t.Errorf("the only engine should own all %d partitions: %+v", env.Config.CommandPartitions, e)
		}
		if status, d, body := probe(t, env.Svc.AdminAddr, "/livez"); status != 200 || d.Status != "alive" {
			t.Errorf("/livez: %d %s", status, body)
		}
	})

	// An engine whose group has not let it in yet is not ready; once it holds its
	// assignment it is; when the broker goes away it is not again.
	t.Run("EngineJoiningThenBrokerDown", func(t *testing.T) {
		t.Parallel()
		ns := servicetest.Namespace(t, nil)
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, ns.Topic(topics.CommandsTopic)),
			kfake.AllowAutoTopicCreation(), kfake.GroupMinSessionTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		closeCluster := sync.OnceFunc(cluster.Close)
		t.Cleanup(closeCluster)
		// The coordinator says the engine group is still loading: its JoinGroup is
		// retried until the hold is lifted.
		var hold atomic.Bool
		var refused atomic.Int64
		hold.Store(true)
		cluster.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
			cluster.KeepControl()
			jg := req.(*kmsg.JoinGroupRequest)
			if !hold.Load() || jg.Group != ns.Group("paysvc-engine") {
				return nil, nil, false
			}
			refused.Add(1)
			resp := jg.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp, nil, true
		})
		svc := startWith(t, func(c *service.Config) {
			c.Roles = []string{service.RoleEngine}
			c.KafkaBrokers = cluster.ListenAddrs()
			c.KafkaNamespace = ns
		})
		// Not ready while joining, however long it lasts: probed at every look
		// until the coordinator has refused the engine's join three times, so it
		// stayed unready across retries of its join, not only before the first.
		waittest.Eventually(t, 30*time.Second, func() (bool, string) {
			status, d, body := probe(t, svc.AdminAddr, "/readyz")
			if status != 503 || d.Status != "unavailable" || d.Checks["engine"].OK || d.Checks["engine"].Reason != "joining" ||
				!d.Checks["database"].OK || !d.Checks["broker"].OK {
				t.Fatalf("an engine still joining: %d %s", status, body)
			}
			return refused.Load() >= 3, fmt.Sprintf("the engine's join was refused %d times, want 3", refused.Load())
		})
		if refused.Load() == 0 {
			t.Fatal("the engine never tried to join: the test proved nothing")
		}
		hold.Store(false)
		d := eventually(t, svc.AdminAddr, "the engine once in its group", func(s int, _ readyDoc) bool { return s == 200 })
		if e := d.Checks["engine"]; e.Owned == nil || *e.Owned != 4 {
			t.Fatalf("ready engine: %+v", e)
		}

		closeCluster()
		// The engine may notice first (its heartbeats fail, it is out of its group):
		// wait for the broker check itself.
		d = eventually(t, svc.AdminAddr, "the broker gone", func(s int, d readyDoc) bool { return s == 503 && !d.Checks["broker"].OK })
		if c := d.Checks["broker"]; c.OK || c.Reason != "unreachable" || !d.Checks["database"].OK {
			t.Fatalf("broker down: %+v", d)
		}
		if status, _, body := probe(t, svc.AdminAddr, "/livez"); status != 200 {
			t.Fatalf("/livez with the broker down: %d %s", status, body)
		}
	})

	// The database behind a TCP proxy the test cuts.
	t.Run("DatabaseDown", func(t *testing.T) {
		t.Parallel()
		schema := storagetest.New(t)
		u, err := url.Parse(schema.URL)
		if err != nil {
			t.Fatal(err)
		}
		px := startProxy(t, u.Host)
		u.Host = px.addr()
		svc := startWithSchema(t, schema, func(c *service.Config) {
			c.Roles = []string{service.RoleEngine, service.RoleRelay}
			c.DatabaseURL = u.String()
		})
		eventually(t, svc.AdminAddr, "before the cut", func(s int, _ readyDoc) bool { return s == 200 })
		px.cut()
		d := eventually(t, svc.AdminAddr, "the database cut off", func(s int, _ readyDoc) bool { return s == 503 })
		if c := d.Checks["database"]; c.OK || c.Reason != "unreachable" || !d.Checks["broker"].OK || d.Status != "unavailable" {
			t.Fatalf("database down: %+v", d)
		}
		if status, _, body := probe(t, svc.AdminAddr, "/livez"); status != 200 {
			t.Fatalf("/livez with the database down: %d %s", status, body)
		}
	})
}

// startWith starts a service on a fresh schema; mutate adjusts its configuration.
func startWith(t *testing.T, mutate func(*service.Config)) *service.Service {
	return startWithSchema(t, storagetest.New(t), mutate)
}

func startWithSchema(t *testing.T, schema storagetest.Schema, mutate func(*service.Config)) *service.Service {
	t.Helper()
	cfg := servicetest.Config(t, schema)
	mutate(&cfg)
	svc, err := service.Start(context.Background(), cfg, servicetest.Logger())
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(svc.Close)
	return svc
}

// tcpProxy forwards connections to a target until cut: then it refuses new
// ones and closes those it carries, as a database host that went away.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	isCut  bool
}

func startProxy(t *testing.T, target string) *tcpProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.isCut {
				p.mu.Unlock()
				c.Close()
				up.Close()
				return
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
