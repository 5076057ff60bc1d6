package rolloutgroup

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// consulStub answers as Consul's /v1/health/service/<service>?passing: a list
// with one entry per passing instance, passing(service) of them, and records
// the services asked for.
type consulStub struct {
	srv     *httptest.Server
	mu      sync.Mutex
	passing int
	asked   []string
}

func newConsulStub(t *testing.T, passing int) *consulStub {
	c := &consulStub{passing: passing}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		service, ok := strings.CutPrefix(r.URL.Path, "/v1/health/service/")
		if !ok || !r.URL.Query().Has("passing") {
			http.NotFound(w, r)
			return
		}
		c.mu.Lock()
		c.asked = append(c.asked, service)
		n := c.passing
		c.mu.Unlock()
		entries := make([]string, n)
		for i := range entries {
			entries[i] = fmt.Sprintf(`{"Service": {"ID": "%s-%d"}, "Checks": [{"Status": "passing"}]}`, service, i)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "[%s]", strings.Join(entries, ","))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *consulStub) setPassing(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.passing = n
}

func (c *consulStub) askedFor(service string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.asked {
		if s == service {
			n++
		}
	}
	return n
}

// An http check against a Consul-style health endpoint gates each member:
// while fewer than two instances of zone-a pass, zone-b waits; once they
// pass, the rollout goes on and completes under the guarantees, the check's
// URL expanded for each member.
func TestHTTPCheckGatesMembers(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	consul := newConsulStub(t, 0)
	check := v1alpha1.AnalysisCheck{
		Name: "consul", Gate: v1alpha1.GateAfterMember,
		HTTP:      &v1alpha1.HTTPCheck{URL: consul.srv.URL + "/v1/health/service/{{ .Member }}?passing", JSONPath: "#"},
		Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorGreaterOrEqual, Threshold: "2"}},
		Interval:  &metav1.Duration{Duration: time.Second}, FailureThreshold: 100,
	}
	mon := e.analyzedMembers(nil, v1alpha1.FailurePause, check, 2, "zone-a", "zone-b")
	e.rollTo("r2", "zone-a", "zone-b")

	e.Eventually(30*time.Second, "three requests at zone-a's gate", func() (bool, error) { return consul.askedFor("zone-a") >= 3, nil })
	rg := e.GetGroup("ingester")
	if got := e.podRevisions("zone-b"); got["r1"] != 2 {
		t.Errorf("zone-b pods %v while zone-a's gate holds, want both on r1", got)
	}
	an := rg.Status.Analysis
	if rg.Status.Phase != v1alpha1.PhaseAnalyzing || an == nil || len(an.Checks) != 1 || an.Checks[0].LastValue != "0" ||
		an.Checks[0].Query != "GET "+consul.srv.URL+"/v1/health/service/zone-a?passing" {
		t.Errorf("status while the gate holds: phase %s analysis %+v", rg.Status.Phase, an)
	}
	if consul.askedFor("zone-b") != 0 {
		t.Errorf("zone-b's health asked for before zone-a's gate passed")
	}

	consul.setPassing(2)
	e.waitRolledToTag("ingester", "r2", 60*time.Second)
	expectNoBreaches(t, mon)
	if consul.askedFor("zone-b") == 0 {
		t.Error("zone-b's gate never asked for zone-b's health")
	}
	e.waitEvent("ingester", "GatePassed", 10*time.Second)
}
