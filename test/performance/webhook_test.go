/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDue(t *testing.T) {
	tests := []struct {
		i    int
		rate float64
		want time.Duration
	}{
		{0, 8000, 0},
		{1, 8000, 125 * time.Microsecond},
		{4000, 8000, 500 * time.Millisecond},
		{250, 250, time.Second},
		{1, 3, 333333333 * time.Nanosecond},
	}
	for _, tt := range tests {
		if got := due(tt.i, tt.rate); got != tt.want {
			t.Errorf("due(%d, %v) = %v, want %v", tt.i, tt.rate, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	var samples []sample
	for i := 1; i <= 200; i++ {
		s := sample{at: time.Duration(i) * time.Millisecond, latency: time.Duration(i) * 100 * time.Microsecond}
		switch i {
		case 7:
			s.fail = failDecision
		case 8, 9:
			s.fail = failTransport
		}
		samples = append(samples, s)
	}
	got := summarize(samples, 250, time.Second, 3)
	want := latencySummary{
		Seconds: 1, OfferedPerSecond: 250, AchievedPerSecond: 197, Requests: 200, Dropped: 3, Errors: 3,
		ErrorsByKind: map[string]int{failDecision: 1, failTransport: 2},
		// Nearest rank: of 200, p50 is the 100th, p90 the 180th, p99 the 198th.
		P50Seconds: 0.010, P90Seconds: 0.018, P99Seconds: 0.0198, MaxSeconds: 0.020,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("summarize =\n%+v, want\n%+v", got, want)
	}
	if empty := summarize(nil, 100, time.Second, 5); empty.Requests != 0 || empty.Dropped != 5 || empty.holds(time.Hour) {
		t.Errorf("summarize of no samples = %+v, holding %t", empty, empty.holds(time.Hour))
	}
}

func TestHighestHeld(t *testing.T) {
	step := func(rate, achieved, p99ms float64, errs, dropped int) latencySummary {
		return latencySummary{OfferedPerSecond: rate, AchievedPerSecond: achieved, P99Seconds: p99ms / 1000, Requests: 10, Errors: errs, Dropped: dropped}
	}
	limit := 10 * time.Millisecond
	tests := []struct {
		name   string
		steps  []latencySummary
		want   float64
		wantOK bool
	}{
		{"all hold", []latencySummary{step(250, 250, 1, 0, 0), step(500, 499, 2, 0, 0)}, 500, true},
		{"p99 at the limit holds", []latencySummary{step(250, 250, 10, 0, 0), step(500, 500, 10.1, 0, 0)}, 250, true},
		{"a higher step that holds after one that does not counts", []latencySummary{
			step(250, 250, 1, 0, 0), step(500, 500, 12, 0, 0), step(1000, 1000, 3, 0, 0), step(2000, 2000, 30, 0, 0),
		}, 1000, true},
		{"an error fails a step", []latencySummary{step(250, 250, 1, 0, 0), step(500, 500, 1, 1, 0)}, 250, true},
		{"a dropped request fails a step", []latencySummary{step(250, 250, 1, 0, 0), step(500, 500, 1, 0, 1)}, 250, true},
		{"below 95% of the offered rate fails a step", []latencySummary{step(250, 250, 1, 0, 0), step(500, 470, 1, 0, 0)}, 250, true},
		{"95% holds", []latencySummary{step(1000, 950, 1, 0, 0)}, 1000, true},
		{"only the second holds", []latencySummary{step(250, 250, 11, 0, 0), step(500, 500, 1, 0, 0)}, 500, true},
		{"none holds", []latencySummary{step(250, 250, 11, 0, 0), step(500, 500, 1, 2, 0)}, 0, false},
		{"no steps", nil, 0, false},
	}
	for _, tt := range tests {
		got, ok := highestHeld(tt.steps, limit)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: highestHeld = %v, %t; want %v, %t", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestWithin(t *testing.T) {
	var samples []sample
	for i := range 10 {
		samples = append(samples, sample{at: time.Duration(i) * time.Second})
	}
	got := within(samples, 3*time.Second, 6*time.Second)
	if len(got) != 3 || got[0].at != 3*time.Second || got[2].at != 5*time.Second {
		t.Errorf("within [3s, 6s) = %v, want the samples at 3s, 4s and 5s", got)
	}
}

func TestIsIncrease(t *testing.T) {
	const n = 50
	perTarget := map[int]int{}
	for k := range n * increaseEvery {
		if isIncrease(k, n) {
			perTarget[k%n]++
		}
	}
	for i := range n {
		if perTarget[i] != 1 {
			t.Errorf("StatefulSet %d grows %d times in %d rounds, want once", i, perTarget[i], increaseEvery)
		}
	}
}

func TestReviewTemplate(t *testing.T) {
	sts := statefulSet("ns", guardedName(7), guardedReplicas, oldImage)
	sts.UID, sts.ResourceVersion = "0a0b", "99"
	tmpl, err := newReviewTemplate(sts, policyName(7), 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	uid := requestUID(42)
	if len(uid) != len(uidPlaceholder) {
		t.Errorf("requestUID is %d characters, the placeholder %d", len(uid), len(uidPlaceholder))
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(tmpl.body(uid), &review); err != nil {
		t.Fatal(err)
	}
	req := review.Request
	if req.UID != types.UID(uid) || req.Operation != admissionv1.Update || req.SubResource != "scale" ||
		req.Resource.Resource != "statefulsets" || req.Kind.Kind != "Scale" || req.Name != sts.Name || req.Namespace != "ns" {
		t.Errorf("request = %+v", req)
	}
	var scale, old autoscalingv1.Scale
	if err := json.Unmarshal(req.Object.Raw, &scale); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 2 || old.Spec.Replicas != 3 || scale.UID != "0a0b" || scale.Status.Selector != "app="+sts.Name {
		t.Errorf("object %+v, old object %+v", scale, old)
	}
	if tmpl.allow {
		t.Error("a decrease is expected to be allowed")
	}
	var opts metav1.UpdateOptions
	if err := json.Unmarshal(req.Options.Raw, &opts); err != nil || opts.FieldManager != "kubectl-scale" {
		t.Errorf("options %s: %v", req.Options.Raw, err)
	}
}

func TestCheckAnswer(t *testing.T) {
	deny := reviewTemplate{target: "guarded-07", policy: "guard-07"}
	allow := reviewTemplate{target: "guarded-07", policy: "guard-07", allow: true}
	answer := func(uid string, allowed bool, message string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%q,"allowed":%t,"status":{"message":%q,"code":403}}}`, uid, allowed, message)
	}
	tests := []struct {
		name   string
		tmpl   reviewTemplate
		status int
		body   []byte
		want   string
	}{
		{"denied naming the policy", deny, 200, answer("u1", false, "ScalingPolicy guard-07 forbids scaling guarded-07 down"), ""},
		{"allowed increase", allow, 200, []byte(`{"response":{"uid":"u1","allowed":true}}`), ""},
		{"denied without the policy", deny, 200, answer("u1", false, "downscale forbidden"), failDecision},
		{"a decrease allowed", deny, 200, answer("u1", true, ""), failDecision},
		{"an increase denied", allow, 200, answer("u1", false, "ScalingPolicy guard-07"), failDecision},
		{"another request's UID", deny, 200, answer("u2", false, "ScalingPolicy guard-07"), failAnswer},
		{"no response", deny, 200, []byte(`{"kind":"AdmissionReview"}`), failAnswer},
		{"not JSON", deny, 200, []byte(`404 page not found`), failAnswer},
		{"HTTP error", deny, 500, []byte(`oops`), failStatus},
	}
	for _, tt := range tests {
		if got, detail := checkAnswer(tt.tmpl, "u1", tt.status, tt.body); got != tt.want {
			t.Errorf("%s: checkAnswer = %q (%s), want %q", tt.name, got, detail, tt.want)
		}
	}
}

func TestRateList(t *testing.T) {
	var l rateList
	if err := l.Set("250, 500,1000"); err != nil || l.String() != "250,500,1000" {
		t.Errorf("Set = %v, %v", l, err)
	}
	for _, bad := range []string{"250,x", "0", "-5", ""} {
		if err := l.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

// fakeNoDownscale answers reviews as the no-downscale webhook should: a
// decrease is denied naming the guarded StatefulSet's policy.
func fakeNoDownscale(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var scale, old autoscalingv1.Scale
	_ = json.Unmarshal(review.Request.Object.Raw, &scale)
	_ = json.Unmarshal(review.Request.OldObject.Raw, &old)
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: scale.Spec.Replicas >= old.Spec.Replicas}
	if !resp.Allowed {
		policy := strings.Replace(review.Request.Name, "guarded-", "guard-", 1)
		resp.Result = &metav1.Status{Message: "ScalingPolicy " + policy + " forbids downscales", Code: http.StatusForbidden}
	}
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(review)
}

// TestLoadClientRun offers load to a TLS server that answers as the webhook
// and checks what the run counted, and that the clients verify the server
// against the bundle they were given.
func TestLoadClientRun(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(fakeNoDownscale))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake refused on purpose
	srv.StartTLS()
	defer srv.Close()
	guarded := []string{guardedName(0), guardedName(1)}
	var templates []reviewTemplate
	for i, name := range guarded {
		sts := statefulSet("ns", name, guardedReplicas, oldImage)
		for _, to := range []int32{guardedReplicas - 1, guardedReplicas + 1} {
			tmpl, err := newReviewTemplate(sts, policyName(i), guardedReplicas, to)
			if err != nil {
				t.Fatal(err)
			}
			templates = append(templates, tmpl)
		}
	}
	tr := newTrust(webhookHost)
	lc := newLoadClient(srv.URL+noDownscalePath, 4, tr.tlsConfig(), templates)

	// No bundle yet: every handshake fails verification.
	if kind, detail, _ := lc.send(context.Background(), 1, true); kind != failTransport {
		t.Fatalf("with no CA bundle, send = %q (%s), want a transport failure", kind, detail)
	}
	bundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := tr.setBundle(bundle, time.Now()); err != nil {
		t.Fatal(err)
	}
	tr.forget()

	run := lc.run(context.Background(), loadPlan{rate: 200, duration: 500 * time.Millisecond, freshEvery: 10})
	s := summarize(run.samples, run.plan.rate, run.elapsed, run.dropped)
	if s.Requests != 100 || s.Errors != 0 || s.Dropped != 0 {
		t.Errorf("run = %s; want 100 requests answered right; first errors %v", describe(s), run.details)
	}
	served := tr.servedCerts()
	if len(served) != 1 || served[0].Serial != serialOf(srv.Certificate()) || served[0].Handshakes < 10 {
		t.Errorf("served = %+v; want the server's certificate in at least 10 handshakes (one a fresh request)", served)
	}
	if got := protocolsOf(run); len(got) != 1 || got[0] != "HTTP/1.1" {
		t.Errorf("protocols = %v", got)
	}
}

func TestWebhookCase(t *testing.T) {
	got, err := cases(caseOptions{kinds: []string{kindWebhook, kindFollow}})
	if err != nil {
		t.Fatal(err)
	}
	want := []benchCase{{kind: kindFollow, operators: 1}, {kind: kindWebhook, operators: 1, apiServerOnly: true}}
	if !slices.Equal(got, want) {
		t.Errorf("cases = %+v, want %+v", got, want)
	}
	if got[1].slug() != "webhook" {
		t.Errorf("slug = %q", got[1].slug())
	}
}

func TestWebhookOptionsValidate(t *testing.T) {
	var o webhookOptions
	bindWebhookFlags(flag.NewFlagSet("bench", flag.ContinueOnError), &o)
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for name, edit := range map[string]func(o *webhookOptions){
		"steps out of order":  func(o *webhookOptions) { o.steps = rateList{500, 250} },
		"no clients":          func(o *webhookOptions) { o.clients = 0 },
		"a validity under 1m": func(o *webhookOptions) { o.certValidity = 30 * time.Second },
		"a rate of zero":      func(o *webhookOptions) { o.rate = 0 },
	} {
		bad := o
		edit(&bad)
		if err := bad.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestBySecond(t *testing.T) {
	ms := time.Millisecond
	samples := []sample{
		{at: 8500 * ms, latency: 1 * ms},
		{at: 9999 * ms, latency: 3 * ms, fail: failTransport},
		{at: 10 * time.Second, latency: 2 * ms},
		{at: 12100 * ms, latency: 5 * ms},
	}
	got := bySecond(samples, 10*time.Second)
	want := []secondSummary{
		{Second: -2, Requests: 1, P99Seconds: 0.001, MaxSeconds: 0.001},
		{Second: -1, Requests: 1, Errors: 1, P99Seconds: 0.003, MaxSeconds: 0.003},
		{Second: 0, Requests: 1, P99Seconds: 0.002, MaxSeconds: 0.002},
		{Second: 2, Requests: 1, P99Seconds: 0.005, MaxSeconds: 0.005},
	}
	if !slices.Equal(got, want) {
		t.Errorf("bySecond =\n%+v, want\n%+v", got, want)
	}
}

func TestParseMachineBusy(t *testing.T) {
	// user 700, nice 10, system 180, idle 800, iowait 30, irq 0, softirq 7, steal 3 ticks.
	got, err := parseMachineBusy("cpu  700 10 180 800 30 0 7 3 0 0\ncpu0 350 5 90 400 15 0 4 1 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if got != 9.0 {
		t.Errorf("parseMachineBusy = %v, want 9 (900 busy ticks)", got)
	}
	if _, err := parseMachineBusy("intr 1 2 3\n"); err == nil {
		t.Error("a /proc/stat without its cpu line was accepted")
	}
}
