package composetest

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// varRef is one ${...} reference of compose's interpolation syntax.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[?-])([^}]*))?\}`)

// interpolate substitutes variables as compose does: ${V:?msg} (and ${V?msg})
// fail when V is unset (or, with the colon, empty); ${V:-d} and ${V-d} default.
// It returns every failure's message, as compose would refuse to start.
func interpolate(text string, env map[string]string) (string, []string) {
	var errs []string
	out := varRef.ReplaceAllStringFunc(text, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		v, set := env[m[1]]
		switch m[2] {
		case ":?":
			if v == "" {
				errs = append(errs, m[1]+": "+m[3])
			}
		case "?":
			if !set {
				errs = append(errs, m[1]+": "+m[3])
			}
		case ":-":
			if v == "" {
				return m[3]
			}
		case "-":
			if !set {
				return m[3]
			}
		}
		return v
	})
	return out, errs
}

type service struct {
	Image       string
	Build       any
	Command     []string
	Profiles    []string
	Environment map[string]string
	Healthcheck *struct {
		Test    []string
		Disable bool
	}
	DependsOn       map[string]struct{ Condition string } `yaml:"depends_on"`
	StopGracePeriod string                                `yaml:"stop_grace_period"`
	Restart         string
	Deploy          struct {
		Resources struct {
			Limits struct{ Cpus, Memory string }
		}
	}
	MemLimit string `yaml:"mem_limit"`
	Cpus     string
	Logging  struct {
		Driver  string
		Options map[string]string
	}
	Volumes []string
	Ports   []string
}

func load(t *testing.T) (raw string, services map[string]service) {
	t.Helper()
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	raw = string(b)
	env := envFile(t, "../../.env.example")
	for k := range env {
		env[k] = "filled-by-the-test-" + strings.ToLower(k) // what an operator writes into .env
	}
	text, errs := interpolate(raw, env)
	if len(errs) > 0 {
		t.Fatalf("with every variable of .env.example set, compose still refuses: %v", errs)
	}
	var doc struct{ Services map[string]service }
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return raw, doc.Services
}

// envFile reads KEY=VALUE lines.
func envFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	return env
}

// servesPaysvc says whether a service runs `paysvc serve`.
func servesPaysvc(s service) bool { return len(s.Command) > 0 && s.Command[0] == "serve" }

func TestCompose(t *testing.T) {
	t.Parallel()
	raw, services := load(t)
	var serving []string
	for name, s := range services {
		if servesPaysvc(s) {
			serving = append(serving, name)
		}
	}
	sort.Strings(serving)
	if len(serving) < 10 {
		t.Fatalf("paysvc services %v: want two of each role", serving)
	}

	t.Run("NoDefaultPasswords", func(t *testing.T) {
		// Without an env file compose refuses to start, naming each secret.
		_, errs := interpolate(raw, map[string]string{})
		for _, v := range []string{"POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD"} {
			if !slices.ContainsFunc(errs, func(e string) bool { return strings.HasPrefix(e, v+":") && strings.Contains(e, ".env") }) {
				t.Errorf("compose starts without %s (errors: %v)", v, errs)
			}
		}
		// Empty values (a copied .env.example not filled in) are refused too.
		if _, errs := interpolate(raw, envFile(t, "../../.env.example")); len(errs) == 0 {
			t.Error("compose starts with the empty values of .env.example")
		}
		// No default for any variable but the trace endpoint (empty: tracing off,
		// no secret), and no password written in the file.
		for _, m := range varRef.FindAllStringSubmatch(raw, -1) {
			if m[0] == "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" {
				continue
			}
			if m[2] != ":?" {
				t.Errorf("${%s%s...}: every variable must be required (${%s:?message})", m[1], m[2], m[1])
			}
		}
		for name, s := range services {
			for k, v := range s.Environment {
				if strings.Contains(k, "PASSWORD") && !strings.HasPrefix(v, "filled-by-the-test-") {
					t.Errorf("%s: %s is not from the env file", name, k)
				}
			}
		}
		for _, name := range serving {
			if u := services[name].Environment["PAYSVC_DATABASE_URL"]; !strings.Contains(u, ":filled-by-the-test-postgres_password@") {
				t.Errorf("%s: PAYSVC_DATABASE_URL does not carry POSTGRES_PASSWORD: %s", name, u)
			}
		}
	})

	t.Run("Healthchecks", func(t *testing.T) {
		want := []string{"CMD", "/paysvc", "probe", "/livez", "/readyz"}
		for _, name := range serving {
			s := services[name]
			if s.Healthcheck == nil || s.Healthcheck.Disable || !slices.Equal(s.Healthcheck.Test, want) {
				t.Errorf("%s: healthcheck %+v, want %v", name, s.Healthcheck, want)
			}
			if s.Environment["PAYSVC_ADMIN_ADDR"] == "" {
				t.Errorf("%s: the probe needs PAYSVC_ADMIN_ADDR", name)
			}
			if s.StopGracePeriod == "" {
				t.Errorf("%s: no stop_grace_period: docker kills after 10s, before a drain may end", name)
			}
		}
		// service_healthy on a service without a healthcheck never starts.
		for name, s := range services {
			for dep, c := range s.DependsOn {
				d, ok := services[dep]
				if !ok {
					t.Errorf("%s depends on %s, which is not a service", name, dep)
				} else if c.Condition == "service_healthy" && (d.Healthcheck == nil || d.Healthcheck.Disable) {
					t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
				}
			}
		}
	})

	t.Run("PinnedImages", func(t *testing.T) {
		pinned := regexp.MustCompile(`^[a-z0-9][a-z0-9./_-]*:v?\d+\.\d+(\.\d+)?$`)
		var images []string
		for name, s := range services {
			if s.Image == "" {
				if s.Build == nil {
					t.Errorf("%s: neither image nor build", name)
				}
				continue
			}
			images = append(images, s.Image)
			if !pinned.MatchString(s.Image) {
				t.Errorf("%s: image %q is not pinned to an explicit version", name, s.Image)
			}
		}
		sort.Strings(images)
		t.Logf("images: %v", images)
	})

	t.Run("OneMailCatcher", func(t *testing.T) {
		urls := map[string]bool{}
		for _, name := range serving {
			u := services[name].Environment["PAYSVC_SMTP_URL"]
			if u == "" {
				t.Errorf("%s: no PAYSVC_SMTP_URL: it would run a mail sink of its own", name)
			}
			urls[u] = true
		}
		if len(urls) != 1 {
			t.Fatalf("instances send mail to %d places: %v", len(urls), urls)
		}
		for u := range urls {
			host := strings.TrimPrefix(u, "smtp://")
			host, _, _ = strings.Cut(host, ":")
			if c, ok := services[host]; !ok || c.Healthcheck == nil {
				t.Errorf("the mail catcher %s is not a service with a healthcheck", host)
			}
		}
	})

	t.Run("RestartLimitsLogs", func(t *testing.T) {
		for name, s := range services {
			// A one-off command (a profile's service, such as admin) does not restart.
			if s.Restart != "unless-stopped" && s.Restart != "always" && (len(s.Profiles) == 0 || s.Restart != "no") {
				t.Errorf("%s: restart %q, want unless-stopped: a crashed process would stay down", name, s.Restart)
			}
			l := s.Deploy.Resources.Limits
			if (l.Memory == "" && s.MemLimit == "") || (l.Cpus == "" && s.Cpus == "") {
				t.Errorf("%s: no memory and CPU limits (deploy.resources.limits): one runaway process starves the rest", name)
			}
			if s.Logging.Driver != "json-file" || s.Logging.Options["max-size"] == "" || s.Logging.Options["max-file"] == "" {
				t.Errorf("%s: logging %+v, want json-file with max-size and max-file: logs would fill the disk", name, s.Logging)
			}
		}
	})

	t.Run("Alertmanager", func(t *testing.T) {
		am, ok := services["alertmanager"]
		if !ok || !slices.Contains(am.Volumes, "./ops/alertmanager:/etc/alertmanager:ro") {
			t.Fatalf("no alertmanager service mounting ops/alertmanager: %+v", am)
		}
		b, err := os.ReadFile("../prometheus/prometheus.yml")
		if err != nil {
			t.Fatal(err)
		}
		var prom struct {
			Alerting struct {
				Alertmanagers []struct {
					StaticConfigs []struct{ Targets []string } `yaml:"static_configs"`
				}
			}
		}
		if err := yaml.Unmarshal(b, &prom); err != nil {
			t.Fatalf("prometheus.yml: %v", err)
		}
		var targets []string
		for _, a := range prom.Alerting.Alertmanagers {
			for _, c := range a.StaticConfigs {
				targets = append(targets, c.Targets...)
			}
		}
		if !slices.Contains(targets, "alertmanager:9093") {
			t.Errorf("prometheus.yml sends alerts to %v, not to the alertmanager service", targets)
		}
		b, err = os.ReadFile("../alertmanager/alertmanager.yml")
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Route struct {
				Receiver string
				Routes   []struct {
					Matchers []string
					Receiver string
				}
			}
			Receivers []struct{ Name string }
		}
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			t.Fatalf("alertmanager.yml: %v", err)
		}
		receivers := map[string]bool{}
		for _, r := range cfg.Receivers {
			receivers[r.Name] = true
		}
		routed := map[string]bool{}
		for _, r := range cfg.Route.Routes {
			for _, m := range r.Matchers {
				if sev, ok := strings.CutPrefix(m, "severity="); ok && receivers[r.Receiver] {
					routed[strings.Trim(sev, `"`)] = true
				}
			}
		}
		if !routed["page"] || !routed["ticket"] || !receivers[cfg.Route.Receiver] {
			t.Errorf("alertmanager.yml routes severities %v (default %q), want page and ticket to receivers of their own", routed, cfg.Route.Receiver)
		}
	})

	t.Run("TracesProfile", func(t *testing.T) { traces(t, raw, services, serving) })

	t.Run("EnvFileIgnored", func(t *testing.T) {
		b, err := os.ReadFile("../../.gitignore")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Split(string(b), "\n"), "/.env") {
			t.Error(".gitignore does not list /.env: its passwords could be committed")
		}
	})
}

// traces checks the traces profile: a collector taking OTLP over gRPC and HTTP
// and exporting to Jaeger v2, both only in that profile, and every paysvc
// process exporting to the endpoint the operator sets, none by default.
func traces(t *testing.T, raw string, services map[string]service, serving []string) {
	col, jaeger := services["otel-collector"], services["jaeger"]
	if !slices.Equal(col.Profiles, []string{"traces"}) || !slices.Equal(jaeger.Profiles, []string{"traces"}) {
		t.Errorf("otel-collector profiles %v, jaeger profiles %v, want [traces] each", col.Profiles, jaeger.Profiles)
	}
	if !strings.HasPrefix(col.Image, "otel/opentelemetry-collector-contrib:") || !slices.Contains(col.Volumes, "./ops/otel:/etc/otelcol:ro") ||
		!slices.Contains(col.Command, "--config=/etc/otelcol/collector.yml") {
		t.Errorf("otel-collector: %+v, want the contrib image running ops/otel/collector.yml", col)
	}
	if !strings.HasPrefix(jaeger.Image, "jaegertracing/jaeger:2.") || !slices.Contains(jaeger.Ports, "16686:16686") {
		t.Errorf("jaeger: image %q ports %v, want Jaeger v2 with its UI on 16686", jaeger.Image, jaeger.Ports)
	}
	b, err := os.ReadFile("../otel/collector.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Receivers struct {
			OTLP struct {
				Protocols struct{ GRPC, HTTP *struct{ Endpoint string } }
			} `yaml:"otlp"`
		}
		Exporters map[string]struct{ Endpoint string }
		Service   struct {
			Pipelines map[string]struct{ Receivers, Exporters []string }
		}
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("collector.yml: %v", err)
	}
	p := cfg.Receivers.OTLP.Protocols
	if p.GRPC == nil || !strings.HasSuffix(p.GRPC.Endpoint, ":4317") || p.HTTP == nil || !strings.HasSuffix(p.HTTP.Endpoint, ":4318") {
		t.Errorf("collector.yml receives OTLP gRPC %+v and HTTP %+v, want 4317 and 4318", p.GRPC, p.HTTP)
	}
	pl := cfg.Service.Pipelines["traces"]
	if !slices.Contains(pl.Receivers, "otlp") || len(pl.Exporters) != 1 || cfg.Exporters[pl.Exporters[0]].Endpoint != "jaeger:4317" {
		t.Errorf("collector.yml traces pipeline %+v (exporters %+v), want otlp in and jaeger:4317 out", pl, cfg.Exporters)
	}
	// Unset, the endpoint is empty (tracing off); set, every process takes it.
	env := map[string]string{"POSTGRES_PASSWORD": "p", "GRAFANA_ADMIN_PASSWORD": "g", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel-collector:4318"}
	text, errs := interpolate(raw, env)
	var on struct{ Services map[string]service }
	if err := yaml.Unmarshal([]byte(text), &on); err != nil || len(errs) > 0 {
		t.Fatalf("docker-compose.yml with the endpoint set: %v %v", err, errs)
	}
	for _, name := range serving {
		if v, ok := services[name].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; !ok || v != "" {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT %q (set %v), want present and empty by default", name, v, ok)
		}
		if v := on.Services[name].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; v != "http://otel-collector:4318" {
			t.Errorf("%s: OTEL_EXPORTER_OTLP_ENDPOINT %q with the variable set", name, v)
		}
	}
}

// The interpolation the test relies on behaves as compose's.
func TestInterpolate(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SET": "v", "EMPTY": ""}
	for in, want := range map[string]string{
		"${SET:?m}": "v", "${SET}": "v", "${UNSET:-d}": "d", "${EMPTY:-d}": "d", "${EMPTY-d}": "", "${UNSET-d}": "d",
	} {
		if got, errs := interpolate(in, env); got != want || len(errs) != 0 {
			t.Errorf("%s: %q %v, want %q", in, got, errs, want)
		}
	}
	for _, in := range []string{"${UNSET:?m}", "${EMPTY:?m}", "${UNSET?m}"} {
		if _, errs := interpolate(in, env); len(errs) != 1 {
			t.Errorf("%s: %v, want one error", in, errs)
		}
	}
	if _, errs := interpolate("${EMPTY?m}", env); len(errs) != 0 {
		t.Errorf("${EMPTY?m} with EMPTY set to empty: %v", errs)
	}
}
