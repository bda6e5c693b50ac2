package monitoring_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.yaml.in/yaml/v3"

	"github.com/etcdlock/etcdlock/pkg/election/electionmetrics"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics"
	"github.com/etcdlock/etcdlock/pkg/lock/lockmetrics/monitoring"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ruleFile is the part of Prometheus's rule file format the test reads.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlertsParseAndNameExportedMetrics(t *testing.T) {
	var f ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(monitoring.Alerts)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	known := exported(t)
	var used []string
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: no name or no rules", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %q: alert, expr, severity and summary are required", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %q: for %q: %v", r.Alert, r.For, err)
				}
			}
			used = append(used, checkMetrics(t, "alert "+r.Alert, r.Expr, known)...)
		}
	}
	checkCoverage(t, "alerts.yaml", used, known)
}

func TestDashboardParsesAndNamesExportedMetrics(t *testing.T) {
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(monitoring.Dashboard, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	known := exported(t)
	var used []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			used = append(used, checkMetrics(t, "panel "+p.Title, q.Expr, known)...)
		}
	}
	checkCoverage(t, "dashboard.json", used, known)
}

var metricName = regexp.MustCompile(`\betcdlock_[a-z_]+`)

// checkMetrics fails for every metric in expr that the code does not
// export (a histogram's _bucket, _count and _sum series count as it) and
// returns the exported metrics expr uses.
func checkMetrics(t *testing.T, where, expr string, known map[string]bool) []string {
	t.Helper()
	names := metricName.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: no etcdlock metric in %q", where, expr)
	}
	var out []string
	for _, n := range names {
		base := n
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(n, suffix); ok && known[b] {
				base = b
			}
		}
		if !known[base] {
			t.Errorf("%s: metric %s is not one lockmetrics or electionmetrics exports", where, n)
		}
		out = append(out, base)
	}
	return out
}

// checkCoverage fails for every exported metric the file does not use.
func checkCoverage(t *testing.T, file string, used []string, known map[string]bool) {
	t.Helper()
	for n := range known {
		if !slices.Contains(used, n) {
			t.Errorf("%s does not use %s", file, n)
		}
	}
}

// exported returns the names of the metrics the two recorders register.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	reg := &describer{names: map[string]bool{}}
	if _, err := lockmetrics.New(reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := electionmetrics.New(reg, "e"); err != nil {
		t.Fatal(err)
	}
	if len(reg.names) == 0 {
		t.Fatal("the recorders registered no metric")
	}
	return reg.names
}

// describer is a prometheus.Registerer that records the names of the
// metrics registered on it.
type describer struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return true }
