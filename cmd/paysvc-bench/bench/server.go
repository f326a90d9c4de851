package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"paysvc/cmd/paysvc/service"
	"paysvc/storage"
)

// databaseURL is base with its database name replaced.
func databaseURL(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("database url: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// createDatabase makes an empty database for the run on base's server, so the
// figures never depend on what an earlier run or a developer left in the tables.
func createDatabase(ctx context.Context, base, name string) error {
	db, err := storage.Open(ctx, base, 10*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func dropDatabase(ctx context.Context, base, name string) error {
	db, err := storage.Open(ctx, base, 10*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	// FORCE (Postgres 13+) ends sessions a killed child may have left behind.
	if _, err := db.ExecContext(ctx, `DROP DATABASE IF EXISTS `+quoteIdent(name)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// freePort asks the kernel for a loopback port that is free now. Another process
// could take it before the child binds it; the child then fails to start and says so.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// child is the service under test, a `paysvc serve` process of the service's own
// binary (Options.Service), so the bench measures exactly what ships (its own
// process, GC and scheduler).
type child struct {
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:PORT
	admin   string // http://127.0.0.1:PORT of its operator listener (/metrics)
	kafka   string // 127.0.0.1:PORT of its embedded Kafka (when it runs one)
	dir     string // its data dir and log
	logPath string
	exited  chan struct{}
	err     error // the exit status, once exited is closed
}

type childConfig struct {
	Service     string // the paysvc binary that serves
	DatabaseURL string
	CPUProfile  string // when set, the child is this binary's profiling wrapper instead of paysvc serve
	Dir         string
	Env         map[string]string // more variables for the child (a scenario's service settings)
}

func startChild(ctx context.Context, cc childConfig) (*child, error) {
	exe := cc.Service
	args := []string{"serve"}
	if cc.CPUProfile != "" {
		// The profiling wrapper links the same service package as paysvc and
		// serves it in-process; only this binary carries it, so the service's does not.
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own binary: %w", err)
		}
		exe, args = self, []string{childCommand, "--cpuprofile", cc.CPUProfile}
	}
	httpPort, err := freePort()
	if err != nil {
		return nil, err
	}
	kafkaPort, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(cc.Dir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd := exec.Command(exe, args...)
	// The parent's PAYSVC_* settings are inherited on purpose (e.g.
	// PAYSVC_COMMAND_PARTITIONS=16 make bench); only what isolates the run is forced.
	set := map[string]string{
		"PAYSVC_DATABASE_URL": cc.DatabaseURL,
		"PAYSVC_HTTP_ADDR":    "127.0.0.1:" + strconv.Itoa(httpPort),
		"PAYSVC_ADMIN_ADDR":   "127.0.0.1:" + strconv.Itoa(adminPort),
		"PAYSVC_KAFKA_PORT":   strconv.Itoa(kafkaPort),
		"PAYSVC_DATA_DIR":     filepath.Join(cc.Dir, "data"),
		"PAYSVC_RATE_LIMIT":   "0",
		"PAYSVC_LOG_LEVEL":    "warn",
		"PAYSVC_LOG_FORMAT":   "text",
	}
	for k, v := range cc.Env {
		set[k] = v
	}
	cmd.Env = withEnv(os.Environ(), set)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", exe, err)
	}
	c := &child{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", httpPort), admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort), kafka: fmt.Sprintf("127.0.0.1:%d", kafkaPort),
		dir: cc.Dir, logPath: logPath, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	if err := c.waitHealthy(ctx, 90*time.Second); err != nil {
		c.stop()
		return nil, fmt.Errorf("%w\n%s", err, c.logTail(20))
	}
	return c, nil
}

func withEnv(env []string, set map[string]string) []string {
	out := make([]string, 0, len(env)+len(set))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// waitHealthy polls GET /healthz until 200: the listener opens only after the
// migrations, the embedded Kafka and the roles are up.
func (c *child) waitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.exited:
			return fmt.Errorf("paysvc serve exited before it was healthy: %v", c.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("paysvc serve not healthy after %s", limit)
		}
	}
}

// stop sends SIGTERM (the service drains in-flight requests and commits) and waits;
// a child that does not leave in 30 s is killed.
func (c *child) stop() error {
	select {
	case <-c.exited:
		return c.err
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return errors.New("paysvc serve did not stop within 30s of SIGTERM; killed")
	}
	return c.err
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// logTail is the last n lines of the child's log, indented for the report.
func (c *child) logTail(n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  | " + strings.Join(lines, "\n  | ")
}

func (c *child) logLines() int {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

// childCommand is the hidden `paysvc-bench` subcommand that runs the service like
// `serve` does, under a CPU profile. The service code cannot be changed for the
// benchmark, and pprof over HTTP is not exposed, so this wrapper is how the
// service's own CPU time is attributed (--server-cpuprofile).
const childCommand = "serve-profiled"

// ServeProfiled runs the service with every role until ctx ends (SIGTERM), writing
// a CPU profile of the whole run to path and its allocation profile to
// path.allocs.
func ServeProfiled(ctx context.Context, cfg service.Config, log *slog.Logger, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	defer pprof.StopCPUProfile()
	svc, err := service.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	svc.Close()
	// The allocation profile of the same run next to it: allocation and the
	// collection it causes are a fifth of the service's CPU, and only this says
	// which code allocates.
	af, err := os.Create(path + ".allocs")
	if err != nil {
		return err
	}
	defer af.Close()
	return pprof.Lookup("allocs").WriteTo(af, 0)
}

// IsChildCommand tells the flag parser that args are the hidden profiled child's.
func IsChildCommand(args []string) bool { return len(args) > 0 && args[0] == childCommand }
