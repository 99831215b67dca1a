package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"reckon/internal/config"
	"reckon/workflows"
)

// EnvRequireCompose makes a missing docker-compose binary a failure instead
// of a skip (`make test` and CI set it).
const EnvRequireCompose = "RECKON_TEST_REQUIRE_COMPOSE"

const composeFile = "../docker-compose.yml"

// compose is the part of a compose file this test reads.
type compose struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       map[string]string `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []any             `yaml:"ports"` // "host:container" in the file; long form in docker-compose's output
	Volumes     []string          `yaml:"volumes"`
	Profiles    []string          `yaml:"profiles"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck map[string]any `yaml:"healthcheck"`
}

func (s service) reckon() bool { return s.Build["dockerfile"] == "deploy/Dockerfile" }

func load(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, composeFile, b)
}

func parse(t *testing.T, name string, b []byte) compose {
	t.Helper()
	var c compose
	// A key next to a merge (<<: *reckon) overrides the merged one, as in
	// YAML 1.1 and docker-compose; goccy/go-yaml calls that a duplicate.
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.AllowDuplicateMapKey()); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// interpolate applies compose's ${VAR:-default} with the defaults.
var interpolation = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)

func interpolate(s string) string { return interpolation.ReplaceAllString(s, "$1") }

// TestComposeConfigValid runs `docker-compose config`, the validation the
// compose tool itself does before anything starts.
func TestComposeConfigValid(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		if os.Getenv(EnvRequireCompose) == "1" {
			t.Fatalf("docker-compose not found and %s=1: install it (Debian package docker-compose)", EnvRequireCompose)
		}
		t.Skip("docker-compose not installed (apt-get install docker-compose); set " + EnvRequireCompose + "=1 to make this a failure")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, _ := filepath.Abs("..")
	for _, args := range [][]string{
		{"config", "-q"},
		{"--profile", "demo", "--profile", "metrics", "config", "-q"},
		{"config"},
	} {
		cmd := exec.CommandContext(ctx, bin, append([]string{"-f", filepath.Join(root, "docker-compose.yml"), "--project-directory", root}, args...)...)
		cmd.Dir = root
		// Compose interpolates from the environment: a stray variable of
		// the caller must not change what is validated.
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("docker-compose %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), stderr.String())
		}
		if args[0] == "config" && len(args) == 1 {
			// docker-compose's resolved view (anchors and merges expanded)
			// equals what the other tests read from the file.
			resolved, mine := parse(t, "docker-compose config", out.Bytes()), load(t)
			if got, want := sortedKeys(resolved.Services), sortedKeys(mine.Services); !slices.Equal(got, want) {
				t.Errorf("docker-compose sees services %v, the file parses to %v", got, want)
			}
			for name, r := range resolved.Services {
				m := mine.Services[name]
				for k, v := range m.Environment {
					m.Environment[k] = interpolate(v)
				}
				m.Image = interpolate(m.Image)
				if fmt.Sprint(r.Environment) != fmt.Sprint(m.Environment) || !slices.Equal(r.Command, m.Command) || r.Image != m.Image {
					t.Errorf("%s: docker-compose resolves env %v command %v image %s; the file parses to env %v command %v image %s",
						name, r.Environment, r.Command, r.Image, m.Environment, m.Command, m.Image)
				}
			}
		}
	}
}

// TestComposeMatchesReckonConfig checks that the stack and reckon agree:
// every RECKON_* variable is a config key and the values validate, the
// addresses point at services that listen there, the stream instances are
// distinct, the batch workers share the lake, Prometheus scrapes every
// stream worker, the search attributes are reckon's.
func TestComposeMatchesReckonConfig(t *testing.T) {
	c := load(t)
	byEnv := map[string]string{}
	for _, k := range config.Keys() {
		byEnv[config.EnvName(k)] = k
	}
	defaults, err := config.Load("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"kafka", "postgresql", "temporal-schema", "temporal", "temporal-setup", "temporal-ui",
		"topics", "schedule", "stream-1", "stream-2", "batch-1", "batch-2", "gen-sensors", "gen-payments", "gen-fiscal", "ofd-sim", "prometheus"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("service %s missing", name)
		}
	}

	cfgs := map[string]*config.Config{}
	var streams, batches, sqls []string
	instances := map[string]string{}
	for _, name := range sortedKeys(c.Services) {
		s := c.Services[name]
		if !s.reckon() {
			for k := range s.Environment {
				if strings.HasPrefix(k, "RECKON_") {
					t.Errorf("%s: %s on a non-reckon service", name, k)
				}
			}
			continue
		}
		var env []string
		for _, k := range sortedKeys(s.Environment) {
			if !strings.HasPrefix(k, "RECKON_") {
				continue
			}
			if _, ok := byEnv[k]; !ok && k != config.EnvConfigPath {
				t.Errorf("%s: %s is not a reckon config key (reckon config keys)", name, k)
				continue
			}
			env = append(env, k+"="+interpolate(s.Environment[k]))
		}
		cfg, err := config.Load("", env, nil)
		if err != nil {
			t.Errorf("%s: its RECKON_* environment does not validate: %v", name, err)
			continue
		}
		cfgs[name] = cfg
		if len(s.Command) == 0 {
			t.Errorf("%s: no command", name)
			continue
		}
		switch s.Command[0] {
		case "stream":
			streams = append(streams, name)
			if prev, dup := instances[cfg.Stream.Instance]; dup {
				t.Errorf("%s and %s share stream_worker.instance %q: their transactional ids would fence each other", prev, name, cfg.Stream.Instance)
			}
			instances[cfg.Stream.Instance] = name
			if s.Environment["RECKON_STREAM_WORKER_INSTANCE"] == "" {
				t.Errorf("%s: RECKON_STREAM_WORKER_INSTANCE unset: the instance would be the container's random host name, a new transactional id on every restart", name)
			}
			requireDep(t, c, name, "topics", "service_completed_successfully")
		case "batch":
			batches = append(batches, name)
			requireDep(t, c, name, "topics", "service_completed_successfully")
			requireDep(t, c, name, "temporal-setup", "service_completed_successfully")
		case "topics":
			if !slices.Equal(s.Command, []string{"topics", "apply"}) {
				t.Errorf("%s: command %v, want topics apply", name, s.Command)
			}
			requireDep(t, c, name, "kafka", "service_healthy")
		case "schedule":
			if !slices.Equal(s.Command, []string{"schedule", "apply"}) {
				t.Errorf("%s: command %v, want schedule apply", name, s.Command)
			}
			requireDep(t, c, name, "temporal-setup", "service_completed_successfully")
		case "generate":
			requireDep(t, c, name, "topics", "service_completed_successfully")
			requireProfile(t, c, name, "demo")
		case "serve":
			sqls = append(sqls, name)
			if !slices.Equal(s.Command, []string{"serve", "sql"}) || s.Build["target"] != "sql" {
				t.Errorf("%s: command %v, target %q: want serve sql on the Dockerfile's sql target (reckon-sql needs CGO)", name, s.Command, s.Build["target"])
			}
			if !slices.Contains(s.Volumes, "lake:"+cfg.Lake.Root+":ro") {
				t.Errorf("%s: volumes %v: want the lake read-only at lake.root %s", name, s.Volumes, cfg.Lake.Root)
			}
		case "zreport":
			if !slices.Equal(s.Command, []string{"zreport", "ofd-sim"}) {
				t.Errorf("%s: command %v, want zreport ofd-sim", name, s.Command)
			}
			requireProfile(t, c, name, "demo")
		default:
			t.Errorf("%s: %q is not a reckon command this stack runs", name, s.Command[0])
		}

		// Addresses point at services listening there.
		for _, b := range cfg.Kafka.Brokers {
			host, port := splitHostPort(t, name, b)
			k, ok := c.Services[host]
			if !ok {
				t.Errorf("%s: kafka.brokers %s: no service %s", name, b, host)
				continue
			}
			if !strings.Contains(k.Environment["KAFKA_ADVERTISED_LISTENERS"], "://"+host+":"+port) ||
				!strings.Contains(k.Environment["KAFKA_LISTENERS"], ":"+port) {
				t.Errorf("%s: kafka.brokers %s is not a listener %s advertises", name, b, host)
			}
		}
		if host, port := splitHostPort(t, name, cfg.Temporal.Address); host != "temporal" || port != "7233" {
			t.Errorf("%s: temporal.address %s, want the temporal service's frontend temporal:7233", name, cfg.Temporal.Address)
		}
		if !strings.HasPrefix(cfg.Metrics.Addr, "0.0.0.0:") {
			t.Errorf("%s: metrics.addr %q must bind 0.0.0.0 in a container", name, cfg.Metrics.Addr)
		}
		if u, err := url.Parse(cfg.ZReport.OFDURL); err != nil || c.Services[u.Hostname()].Command == nil {
			t.Errorf("%s: zreport.ofd_url %s is not a service of this stack", name, cfg.ZReport.OFDURL)
		} else if sim, ok := cfgs["ofd-sim"]; ok {
			if _, p := splitHostPort(t, "ofd-sim", sim.ZReport.OFDSimAddr); p != u.Port() {
				t.Errorf("%s: zreport.ofd_url port %s, ofd-sim listens on %s", name, u.Port(), sim.ZReport.OFDSimAddr)
			}
		}
	}

	if len(streams) < 2 || len(batches) < 2 {
		t.Errorf("stream workers %v, batch workers %v: want at least two of each", streams, batches)
	}
	// The batch workers share one lake: the same named volume at lake.root.
	var lakeVol string
	for _, b := range batches {
		root := cfgs[b].Lake.Root
		found := ""
		for _, v := range c.Services[b].Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if strings.TrimSuffix(dst, ":rw") == root {
				found = src
			}
		}
		if found == "" {
			t.Errorf("%s: no volume mounted at lake.root %s", b, root)
			continue
		}
		if _, named := c.Volumes[found]; !named {
			t.Errorf("%s: lake volume %q is not a named volume", b, found)
		}
		if lakeVol != "" && found != lakeVol {
			t.Errorf("batch workers mount different lakes: %s and %s", lakeVol, found)
		}
		lakeVol = found
	}

	// Other clients of Temporal use the same frontend; the search
	// attributes registered are exactly reckon's.
	for _, n := range []string{"temporal-setup", "temporal-ui"} {
		if got := c.Services[n].Environment["TEMPORAL_ADDRESS"]; got != "temporal:7233" {
			t.Errorf("%s: TEMPORAL_ADDRESS %q, want temporal:7233", n, got)
		}
	}
	if got, want := strings.Fields(c.Services["temporal-setup"].Environment["SEARCH_ATTRIBUTES"]), workflows.SearchAttributes(); !slices.Equal(got, want) {
		t.Errorf("temporal-setup registers %v, reckon's search attributes are %v (workflows.SearchAttributes)", got, want)
	}
	requireDep(t, c, "temporal", "temporal-schema", "service_completed_successfully")
	requireDep(t, c, "temporal-schema", "postgresql", "service_healthy")
	requireDep(t, c, "temporal-setup", "temporal", "service_healthy")
	for _, n := range []string{"kafka", "postgresql", "temporal"} {
		if c.Services[n].Healthcheck == nil {
			t.Errorf("%s: no healthcheck (others wait for service_healthy)", n)
		}
	}

	// The host sees the dev stack's addresses, so the host's reckon works
	// with the default config.
	for _, p := range []struct {
		svc  string
		port string
	}{
		{"kafka", fmt.Sprintf("%d:%s", defaults.Dev.KafkaPort, "9092")},
		{"temporal", fmt.Sprintf("%d:%s", defaults.Dev.TemporalPort, "7233")},
		{"temporal-ui", fmt.Sprintf("%d:%s", defaults.Dev.UIPort, "8080")},
	} {
		if !slices.Contains(c.Services[p.svc].Ports, any(p.port)) {
			t.Errorf("%s: ports %v, want %s (the dev stack's port on the host)", p.svc, c.Services[p.svc].Ports, p.port)
		}
	}
	if !strings.Contains(c.Services["kafka"].Environment["KAFKA_ADVERTISED_LISTENERS"], fmt.Sprintf("://localhost:%d", defaults.Dev.KafkaPort)) {
		t.Errorf("kafka does not advertise localhost:%d for host clients", defaults.Dev.KafkaPort)
	}

	// Prometheus scrapes every stream and batch worker's and SQL endpoint's
	// metrics endpoint, and only services that exist.
	requireProfile(t, c, "prometheus", "metrics")
	targets := prometheusTargets(t)
	if len(sqls) == 0 {
		t.Error("no SQL endpoint service (command serve sql)")
	}
	for _, s := range slices.Concat(streams, batches, sqls) {
		_, port := splitHostPort(t, s, cfgs[s].Metrics.Addr)
		if !slices.Contains(targets, s+":"+port) {
			t.Errorf("deploy/prometheus.yml does not scrape %s:%s (targets %v)", s, port, targets)
		}
	}
	for _, tg := range targets {
		host, _ := splitHostPort(t, "prometheus", tg)
		if _, ok := c.Services[host]; !ok {
			t.Errorf("deploy/prometheus.yml scrapes %s: no such service", tg)
		}
	}
	for _, n := range []string{"kafka", "postgresql", "temporal", "temporal-ui", "stream-1", "stream-2", "batch-1", "batch-2"} {
		if len(c.Services[n].Profiles) > 0 {
			t.Errorf("%s is in profiles %v: the core stack must start without one", n, c.Services[n].Profiles)
		}
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-ldflags='-s -w'", "./workers/reckon"} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile: no %q", want)
		}
	}
	var froms []string
	user := ""
	for _, line := range strings.Split(df, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "FROM" {
			froms = append(froms, f[1])
		}
		if len(f) >= 2 && f[0] == "USER" {
			user = f[1]
		}
	}
	if len(froms) < 2 {
		t.Errorf("Dockerfile: %d stages, want a build stage and a final one", len(froms))
	} else if final := froms[len(froms)-1]; !strings.Contains(final, "distroless") && final != "scratch" {
		t.Errorf("Dockerfile: final stage %s, want distroless or scratch", final)
	}
	if uid, _, _ := strings.Cut(user, ":"); user == "" || uid == "0" || uid == "root" {
		t.Errorf("Dockerfile: USER %q, want a non-root user", user)
	}
}

func requireDep(t *testing.T, c compose, svc, on, cond string) {
	t.Helper()
	if d, ok := c.Services[svc].DependsOn[on]; !ok || d.Condition != cond {
		t.Errorf("%s: depends_on %s: %s missing (have %+v)", svc, on, cond, c.Services[svc].DependsOn)
	}
}

func requireProfile(t *testing.T, c compose, svc, profile string) {
	t.Helper()
	if !slices.Contains(c.Services[svc].Profiles, profile) {
		t.Errorf("%s: profiles %v, want %s", svc, c.Services[svc].Profiles, profile)
	}
}

func splitHostPort(t *testing.T, where, addr string) (string, string) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: %q: %v", where, addr, err)
		return "", ""
	}
	if _, err := strconv.Atoi(p); err != nil {
		t.Errorf("%s: %q: port is not a number", where, addr)
	}
	return h, p
}

func prometheusTargets(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &p); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	var out []string
	for _, sc := range p.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			out = append(out, st.Targets...)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
