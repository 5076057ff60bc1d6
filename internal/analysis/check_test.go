package analysis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var now = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

func lessThan(t string) v1alpha1.CheckCondition {
	return v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorLess, Threshold: t}}
}

func pass() Outcome { return Outcome{Query: "q", Verdict: Verdict{Success: true, Value: "0.01"}} }
func fail() Outcome { return Outcome{Query: "q", Verdict: Verdict{Success: false, Value: "0.2"}} }
func qerr() Outcome { return Outcome{Query: "q", Err: errors.New("connection refused")} }

// A sequence of outcomes drives a check through its phases; the table is the
// specification of thresholds and of errors versus failures.
func TestRecordThresholdsAndErrors(t *testing.T) {
	type step struct {
		o     Outcome
		phase v1alpha1.CheckPhase
	}
	tests := []struct {
		name                    string
		success, failure, error int32
		steps                   []step
		wantS, wantF, wantE     int32
	}{
		{name: "one success passes with the defaults", steps: []step{{pass(), v1alpha1.CheckPassed}}, wantS: 1},
		{name: "one failure fails with the defaults", steps: []step{{fail(), v1alpha1.CheckFailed}}, wantF: 1},
		{name: "three successes in a row are needed with successThreshold 3", success: 3,
			steps: []step{{pass(), v1alpha1.CheckRunning}, {pass(), v1alpha1.CheckRunning}, {pass(), v1alpha1.CheckPassed}}, wantS: 3},
		{name: "a failure restarts the count of successes", success: 2, failure: 2,
			steps: []step{{pass(), v1alpha1.CheckRunning}, {fail(), v1alpha1.CheckRunning}, {pass(), v1alpha1.CheckRunning}, {pass(), v1alpha1.CheckPassed}}, wantS: 2},
		{name: "failures must be consecutive", failure: 2,
			steps: []step{{fail(), v1alpha1.CheckRunning}, {pass(), v1alpha1.CheckPassed}, {fail(), v1alpha1.CheckRunning}, {fail(), v1alpha1.CheckFailed}}, wantF: 2},
		{name: "a passed check that fails again is Failed", steps: []step{{pass(), v1alpha1.CheckPassed}, {fail(), v1alpha1.CheckFailed}}, wantF: 1},
		{name: "errors are not failures: two errors and a success pass", steps: []step{{qerr(), v1alpha1.CheckRunning}, {qerr(), v1alpha1.CheckRunning}, {pass(), v1alpha1.CheckPassed}}, wantS: 1},
		{name: "errorThreshold errors in a row fail the check as Errored",
			steps: []step{{qerr(), v1alpha1.CheckRunning}, {qerr(), v1alpha1.CheckRunning}, {qerr(), v1alpha1.CheckErrored}}, wantE: 3},
		{name: "a result resets the count of errors", error: 2,
			steps: []step{{qerr(), v1alpha1.CheckRunning}, {fail(), v1alpha1.CheckFailed}}, wantF: 1},
		{name: "an error neither breaks a run of successes nor counts as one", success: 2,
			steps: []step{{pass(), v1alpha1.CheckRunning}, {qerr(), v1alpha1.CheckRunning}, {pass(), v1alpha1.CheckPassed}}, wantS: 2},
		{name: "an error neither breaks a run of failures", failure: 2,
			steps: []step{{fail(), v1alpha1.CheckRunning}, {qerr(), v1alpha1.CheckRunning}, {fail(), v1alpha1.CheckFailed}}, wantF: 2},
		{name: "errorThreshold 1 errors on the first error", error: 1, steps: []step{{qerr(), v1alpha1.CheckErrored}}, wantE: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := v1alpha1.AnalysisCheck{Name: "c", Condition: lessThan("0.05"), SuccessThreshold: tt.success, FailureThreshold: tt.failure, ErrorThreshold: tt.error}
			s := SettingsOf(c)
			st := NewCheckStatus("c")
			for i, step := range tt.steps {
				st = Record(s, st, step.o, now.Add(time.Duration(i)*time.Second))
				if st.Phase != step.phase {
					t.Fatalf("after step %d: phase %s, want %s (%+v)", i, st.Phase, step.phase, st)
				}
			}
			if st.ConsecutiveSuccesses != tt.wantS || st.ConsecutiveFailures != tt.wantF || st.ConsecutiveErrors != tt.wantE {
				t.Errorf("counts s=%d f=%d e=%d, want %d %d %d", st.ConsecutiveSuccesses, st.ConsecutiveFailures, st.ConsecutiveErrors, tt.wantS, tt.wantF, tt.wantE)
			}
		})
	}
}

func TestRecordKeepsValueAndError(t *testing.T) {
	s := SettingsOf(v1alpha1.AnalysisCheck{Name: "c", Condition: lessThan("1")})
	st := Record(s, NewCheckStatus("c"), fail(), now)
	st = Record(s, st, qerr(), now.Add(time.Second))
	if st.LastValue != "0.2" || st.LastError != "connection refused" || !st.LastTime.Time.Equal(now.Add(time.Second)) || st.Query != "q" {
		t.Errorf("after a failure and an error: %+v", st)
	}
	st = Record(s, st, pass(), now.Add(2*time.Second))
	if st.LastValue != "0.01" || st.LastError != "" {
		t.Errorf("a result clears the error: %+v", st)
	}
	long := Record(s, NewCheckStatus("c"), Outcome{Err: errors.New(strings.Repeat("x", 5000))}, now)
	if len(long.LastError) > maxErrorLength+3 {
		t.Errorf("lastError of %d bytes, want at most %d", len(long.LastError), maxErrorLength+3)
	}
}

// initialDelay and interval schedule the queries: the first at the gate's
// start plus initialDelay, each next one interval after the previous.
func TestSchedule(t *testing.T) {
	c := v1alpha1.AnalysisCheck{Name: "c", Condition: lessThan("1"),
		InitialDelay: &metav1.Duration{Duration: 30 * time.Second}, Interval: &metav1.Duration{Duration: 10 * time.Second}}
	s := SettingsOf(c)
	start := now
	st := NewCheckStatus("c")
	tests := []struct {
		at   time.Duration
		want bool
	}{{0, false}, {29 * time.Second, false}, {30 * time.Second, true}}
	for _, tt := range tests {
		if got := Due(s, st, start, start.Add(tt.at)); got != tt.want {
			t.Errorf("first query due at +%v = %v, want %v", tt.at, got, tt.want)
		}
	}
	st = Record(s, st, Outcome{Verdict: Verdict{Success: false}}, start.Add(31*time.Second))
	st.Phase = v1alpha1.CheckRunning // failureThreshold aside, the schedule is what is tested
	if at, ok := NextQuery(s, st, start); !ok || !at.Equal(start.Add(41*time.Second)) {
		t.Errorf("next query at %v (%v), want +41s", at.Sub(start), ok)
	}
	if Due(s, st, start, start.Add(40*time.Second)) || !Due(s, st, start, start.Add(41*time.Second)) {
		t.Error("the next query is due one interval after the last")
	}
	for _, phase := range []v1alpha1.CheckPhase{v1alpha1.CheckFailed, v1alpha1.CheckErrored} {
		st.Phase = phase
		if _, ok := NextQuery(s, st, start); ok {
			t.Errorf("a %s check is queried again", phase)
		}
	}
	// A check last queried at an earlier gate starts over.
	old := metav1.NewTime(start.Add(-time.Hour))
	if at, _ := NextQuery(s, v1alpha1.CheckStatus{Phase: v1alpha1.CheckPassed, LastTime: &old}, start); !at.Equal(start.Add(30 * time.Second)) {
		t.Errorf("check of an earlier gate next at %v, want the start plus initialDelay", at)
	}
}

func TestSettingsDefaults(t *testing.T) {
	s := SettingsOf(v1alpha1.AnalysisCheck{Interval: &metav1.Duration{Duration: time.Millisecond}})
	want := Settings{Interval: MinInterval, SuccessThreshold: 1, FailureThreshold: 1, ErrorThreshold: 3}
	if s != want {
		t.Errorf("SettingsOf(zero) = %+v, want %+v", s, want)
	}
	if GateOf(v1alpha1.AnalysisCheck{}) != v1alpha1.GateAfterMember {
		t.Error("a check without gate runs AfterMember")
	}
}

func TestJudge(t *testing.T) {
	cmpCond := func(op v1alpha1.ComparisonOperator, th string) v1alpha1.CheckCondition {
		return v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: op, Threshold: th}}
	}
	one := []Sample{{Value: 0.01}}
	three := []Sample{{Metric: `{zone="c"}`, Value: 0.03}, {Metric: `{zone="a"}`, Value: 0.01}, {Metric: `{zone="b"}`, Value: 0.2}}
	tests := []struct {
		name    string
		cond    v1alpha1.CheckCondition
		samples []Sample
		want    Verdict
		wantErr bool
	}{
		{"hasData true with data", v1alpha1.CheckCondition{HasData: ptr.To(true)}, three, Verdict{true, "3 series"}, false},
		{"hasData true without data", v1alpha1.CheckCondition{HasData: ptr.To(true)}, nil, Verdict{false, "no data"}, false},
		{"hasData false without data (no alert firing)", v1alpha1.CheckCondition{HasData: ptr.To(false)}, nil, Verdict{true, "no data"}, false},
		{"hasData false with data", v1alpha1.CheckCondition{HasData: ptr.To(false)}, one, Verdict{false, "0.01"}, false},
		{"< met", cmpCond("<", "0.05"), one, Verdict{true, "0.01"}, false},
		{"< not met by one series names it", cmpCond("<", "0.05"), three, Verdict{false, `3 series, 0.2 at {zone="b"}`}, false},
		{"< met by all shows the max", cmpCond("<", "1"), three, Verdict{true, `3 series, max 0.2 at {zone="b"}`}, false},
		{">= met by all shows the min", cmpCond(">=", "0.01"), three, Verdict{true, `3 series, min 0.01 at {zone="a"}`}, false},
		{"<= on the boundary", cmpCond("<=", "0.01"), one, Verdict{true, "0.01"}, false},
		{"> on the boundary", cmpCond(">", "0.01"), one, Verdict{false, "0.01"}, false},
		{"== exact", cmpCond("==", "1e-2"), one, Verdict{true, "0.01"}, false},
		{"!= equal fails", cmpCond("!=", "0.01"), one, Verdict{false, "0.01"}, false},
		{"compare with no data fails", cmpCond("<", "0.05"), nil, Verdict{false, "no data"}, false},
		{"NaN fails <", cmpCond("<", "1"), []Sample{{Value: nan()}}, Verdict{false, "NaN"}, false},
		{"NaN meets !=", cmpCond("!=", "1"), []Sample{{Value: nan()}}, Verdict{true, "NaN"}, false},
		{"a bad threshold is an error", cmpCond("<", "five"), one, Verdict{}, true},
		{"a bad operator is an error", cmpCond("~", "1"), one, Verdict{}, true},
		{"no condition is an error", v1alpha1.CheckCondition{}, one, Verdict{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Judge(tt.cond, tt.samples)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Judge = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	c := v1alpha1.AnalysisCheck{Name: "error-rate", Condition: lessThan("0.05"), FailureThreshold: 2}
	got := Explain(c, v1alpha1.CheckStatus{Phase: v1alpha1.CheckFailed, LastValue: "0.2", ConsecutiveFailures: 2})
	want := `check error-rate failed: value 0.2 does not meet "< 0.05" (2 consecutive failures, failureThreshold 2)`
	if got != want {
		t.Errorf("Explain(failed) = %q, want %q", got, want)
	}
	got = Explain(c, v1alpha1.CheckStatus{Phase: v1alpha1.CheckErrored, ConsecutiveErrors: 3, LastError: "connection refused"})
	want = "check error-rate: 3 consecutive query errors (errorThreshold 3), last: connection refused"
	if got != want {
		t.Errorf("Explain(errored) = %q, want %q", got, want)
	}
}

func TestExpandQuery(t *testing.T) {
	vars := Vars{Member: "ingester-zone-b", Namespace: "mimir", Group: "ingester", Revision: "ingester-zone-b-7d9f"}
	tests := []struct {
		query, want string
		wantErr     string
	}{
		{query: `sum(rate(errors_total{namespace="{{ .Namespace }}",pod=~"{{ .Member }}-.*"}[1m]))`,
			want: `sum(rate(errors_total{namespace="mimir",pod=~"ingester-zone-b-.*"}[1m]))`},
		{query: `up{group="{{.Group}}",rev="{{.Revision}}"}`, want: `up{group="ingester",rev="ingester-zone-b-7d9f"}`},
		{query: `vector(1)`, want: `vector(1)`},
		{query: "up{a=\"{{  .Member\t}}\",b=\"{{\n.Namespace }}\"}}", want: "up{a=\"ingester-zone-b\",b=\"mimir\"}}"},
		{query: `up{zone="{{ .Zone }}"}`, wantErr: `{{ .Zone }} at byte 9 is not a variable`},
		{query: `up{zone="{{ .Member }"}`, wantErr: "{{ at byte 9 is not closed"},
		{query: `up{zone=~"{{ range 3 }}{{ $.Member }}|{{ end }}"}`, wantErr: "{{ range 3 }} at byte 10 is not a variable"},
		// Each level of nested define and template calls doubles the output:
		// a 1.3 KB query expanded to 15.7 MB. Only the variables are taken.
		{query: `{{ define "a" }}{{ .Member }}{{ .Member }}{{ end }}{{ template "a" . }}`, wantErr: `{{ define "a" }} at byte 0 is not a variable`},
		{query: `{{ if .Member }}x{{ end }}`, wantErr: "{{ if .Member }}"},
		{query: `{{ .Member | printf "%s%s" }}`, wantErr: "is not a variable"},
		{query: `{{- .Member -}}`, wantErr: "is not a variable"},
		{query: `{{/* a comment */}}`, wantErr: "is not a variable"},
		{query: `{{ .Member.Name }}`, wantErr: "is not a variable"},
	}
	for _, tt := range tests {
		got, err := ExpandQuery(tt.query, vars)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ExpandQuery(%q) error %v, want one containing %q", tt.query, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("ExpandQuery(%q) = %q, %v; want %q", tt.query, got, err, tt.want)
		}
	}
	if err := ValidateQuery(`{{ .Revision }}`); err != nil {
		t.Errorf("ValidateQuery of a known variable: %v", err)
	}
}

func TestExpandQueryBoundsTheOutput(t *testing.T) {
	long := strings.Repeat("m", MaxExpandedQueryBytes/4+1)
	_, err := ExpandQuery(`{{ .Member }}{{ .Member }}{{ .Member }}{{ .Member }}`, Vars{Member: long})
	if want := fmt.Sprintf("over the limit of %d bytes", MaxExpandedQueryBytes); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
	q := strings.Repeat("{{.Member}}", 4)
	if got, err := ExpandQuery(q, Vars{Member: long[:MaxExpandedQueryBytes/4]}); err != nil || len(got) != MaxExpandedQueryBytes {
		t.Fatalf("an expansion of exactly the limit: %d bytes, %v", len(got), err)
	}
}
