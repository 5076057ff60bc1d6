package certs

import (
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0         = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	testSANs   = ServingSANs("echelon-webhook", "ops", "cluster.local", []string{"127.0.0.1"})
	testPolicy = Policy{CertValidity: 30 * time.Hour, CAValidity: 300 * time.Hour, Propagation: 10 * time.Second, SANs: testSANs}
)

func mustCA(t *testing.T, at time.Time, validity time.Duration) *keyPair {
	t.Helper()
	ca, err := newCA(at, validity)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustServing(t *testing.T, at time.Time, ca *keyPair, sans SANs) *keyPair {
	t.Helper()
	s, err := newServing(at, testPolicy.CertValidity, ca, sans)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bundleOf(cas ...*keyPair) []*x509.Certificate {
	var b []*x509.Certificate
	for _, ca := range cas {
		b = append(b, ca.Cert)
	}
	return b
}

func TestDecide(t *testing.T) {
	// oldCA was issued at t0 and is renewed near t0+200h; newCA replaced it at
	// t0+201h. otherCA signs nothing of ours.
	oldCA := mustCA(t, t0, testPolicy.CAValidity)
	newCA := mustCA(t, t0.Add(201*time.Hour), testPolicy.CAValidity)
	otherCA := mustCA(t, t0, testPolicy.CAValidity)
	serving := mustServing(t, t0, oldCA, testSANs)
	lateServing := mustServing(t, t0.Add(190*time.Hour), oldCA, testSANs) // valid to t0+220h
	newServing := mustServing(t, t0.Add(202*time.Hour), newCA, testSANs)
	strangerServing := mustServing(t, t0, otherCA, testSANs)
	wrongNames := mustServing(t, t0, oldCA, ServingSANs("old-service", "ops", "cluster.local", nil))

	fresh := State{CA: oldCA, Bundle: bundleOf(oldCA), Serving: serving}
	rotating := State{CA: newCA, Bundle: bundleOf(newCA, oldCA), Serving: lateServing}
	rotatingRecorded := rotating
	rotatingRecorded.InjectedAt = t0.Add(201*time.Hour + time.Minute)

	tests := []struct {
		name     string
		now      time.Time
		state    State
		injected bool
		want     Action
		// wantNext, if set, is Plan.Next.
		wantNext time.Time
		// wantReason, if set, is part of Plan.Reason.
		wantReason string
	}{
		{name: "no Secret", now: t0, state: ParseSecret(nil), want: ActionCreate, wantReason: "no Secret"},
		{name: "no usable CA", now: t0, state: State{Problem: "ca.crt: no certificate"}, want: ActionCreate, wantReason: "ca.crt"},
		{name: "CA expired: start over", now: t0.Add(301 * time.Hour), state: fresh, want: ActionCreate, wantReason: "CA expired"},
		{name: "fresh: nothing until the serving certificate's renewal", now: t0.Add(time.Hour), state: fresh, want: ActionNone, wantNext: renewAt(serving.Cert)},
		{name: "serving just before two thirds", now: renewAt(serving.Cert).Add(-time.Second), state: fresh, want: ActionNone},
		{name: "serving at two thirds", now: renewAt(serving.Cert), state: fresh, want: ActionRenewServing, wantReason: "two thirds"},
		{name: "serving expired", now: t0.Add(31 * time.Hour), state: fresh, want: ActionRenewServing, wantReason: "expired"},
		{name: "serving missing", now: t0.Add(time.Hour), state: State{CA: oldCA, Bundle: bundleOf(oldCA)}, want: ActionRenewServing, wantReason: "no usable serving"},
		{name: "serving signed by a CA outside the bundle", now: t0.Add(time.Hour), state: State{CA: oldCA, Bundle: bundleOf(oldCA), Serving: strangerServing}, want: ActionRenewServing, wantReason: "not signed"},
		{name: "serving names other SANs", now: t0.Add(time.Hour), state: State{CA: oldCA, Bundle: bundleOf(oldCA), Serving: wrongNames}, want: ActionRenewServing, wantReason: "want"},
		{name: "CA at two thirds: renew the CA alone", now: t0.Add(201 * time.Hour), state: State{CA: oldCA, Bundle: bundleOf(oldCA), Serving: lateServing}, want: ActionRenewCA},
		{name: "bundle lacks the current CA", now: t0.Add(time.Hour), state: State{CA: oldCA, Bundle: bundleOf(otherCA), Serving: serving}, want: ActionUpdateBundle},
		{name: "bundle holds a duplicate", now: t0.Add(time.Hour), state: State{CA: oldCA, Bundle: bundleOf(oldCA, oldCA), Serving: serving}, want: ActionUpdateBundle},
		{name: "rotation: bundle not yet injected everywhere", now: t0.Add(201*time.Hour + time.Minute), state: rotating, injected: false, want: ActionNone, wantReason: "waiting for the bundle"},
		{name: "rotation: injected, not recorded", now: t0.Add(201*time.Hour + time.Minute), state: rotating, injected: true, want: ActionRecordInjection},
		{name: "rotation: recorded, propagating", now: rotatingRecorded.InjectedAt.Add(5 * time.Second), state: rotatingRecorded, injected: true, want: ActionNone, wantNext: rotatingRecorded.InjectedAt.Add(testPolicy.Propagation)},
		{name: "rotation: propagated: the serving certificate moves to the new CA", now: rotatingRecorded.InjectedAt.Add(testPolicy.Propagation), state: rotatingRecorded, injected: true, want: ActionRenewServing, wantReason: "new CA"},
		{name: "rotation: serving past two thirds still waits for injection", now: t0.Add(218 * time.Hour), state: rotating, injected: false, want: ActionNone},
		{name: "rotation: a recorded bundle reset by someone waits for re-injection", now: rotatingRecorded.InjectedAt.Add(time.Minute), state: rotatingRecorded, injected: false, want: ActionNone},
		{name: "rotation stuck until the old CA expired: the bundle drops it first", now: t0.Add(301 * time.Hour), state: rotating, want: ActionUpdateBundle},
		{name: "after rotation: old CA kept until it expires", now: t0.Add(203 * time.Hour), state: State{CA: newCA, Bundle: bundleOf(newCA, oldCA), Serving: newServing}, want: ActionNone, wantNext: renewAt(newServing.Cert)},
		{name: "old CA expired: dropped", now: t0.Add(300*time.Hour + time.Second), state: State{CA: newCA, Bundle: bundleOf(newCA, oldCA), Serving: mustServing(t, t0.Add(290*time.Hour), newCA, testSANs)}, want: ActionUpdateBundle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.now, tt.state, tt.injected, testPolicy)
			if got.Action != tt.want {
				t.Fatalf("Decide = %s (%s), want %s", got.Action, got.Reason, tt.want)
			}
			if !tt.wantNext.IsZero() && !got.Next.Equal(tt.wantNext) {
				t.Errorf("Next = %s, want %s", got.Next, tt.wantNext)
			}
			if !strings.Contains(got.Reason, tt.wantReason) {
				t.Errorf("Reason = %q, want it to contain %q", got.Reason, tt.wantReason)
			}
			if got.Action == ActionNone {
				if !got.Next.After(tt.now) {
					t.Errorf("Next = %s, not after now %s: the loop would spin", got.Next, tt.now)
				}
				return
			}
			// Every action can be carried out, and changes what Decide sees.
			next, err := apply(got.Action, tt.state, tt.now, testPolicy)
			if err != nil {
				t.Fatal(err)
			}
			if again := Decide(tt.now, next, tt.injected, testPolicy); again.Action == got.Action {
				t.Errorf("after %s, Decide asks for it again: %s", got.Action, again.Reason)
			}
		})
	}
}

// TestRotationNeverDrops runs the Secret through two CA lifetimes, deciding
// every few seconds, with an injector and replicas that lag behind, and
// checks at every step that the certificate any replica may present verifies
// against every bundle the API server may be using.
func TestRotationNeverDrops(t *testing.T) {
	p := Policy{CertValidity: 10 * time.Minute, CAValidity: 30 * time.Minute, Propagation: 20 * time.Second, SANs: testSANs}
	const (
		step = 2 * time.Second
		// injectLag: how long the injector takes to copy a new bundle into
		// the configurations; replicaLag: how long a replica takes to serve
		// a new serving certificate (its watch); apiLag: how long the API
		// server keeps using a bundle replaced in the configuration. The
		// Propagation covers apiLag.
		injectLag  = 4 * time.Second
		replicaLag = 6 * time.Second
		apiLag     = 16 * time.Second
	)
	type snapshot struct {
		at      time.Time
		bundle  []*x509.Certificate // in the Secret
		serving *x509.Certificate   // in the Secret
	}
	var history []snapshot
	// at returns the snapshot in force at t.
	at := func(t time.Time) snapshot {
		s := history[0]
		for _, h := range history {
			if !h.at.After(t) {
				s = h
			}
		}
		return s
	}
	var s State
	actions := map[Action]int{}
	for now := t0; now.Before(t0.Add(2 * p.CAValidity)); now = now.Add(step) {
		// The configurations hold the bundle the Secret held injectLag ago.
		injected := len(history) > 0 && s.CA != nil && sameCerts(at(now.Add(-injectLag)).bundle, s.Bundle)
		// Like reconcile: act until nothing is left to do at this moment.
		for range maxWrites {
			plan := Decide(now, s, injected, p)
			if plan.Action == ActionNone {
				if !plan.Next.After(now) {
					t.Fatalf("%s: Next = %s, not after now: the loop would spin", now.Sub(t0), plan.Next.Sub(t0))
				}
				break
			}
			if plan.Action == ActionCreate && now != t0 {
				t.Fatalf("%s: the Secret was created again: %s", now.Sub(t0), plan.Reason)
			}
			next, err := apply(plan.Action, s, now, p)
			if err != nil {
				t.Fatal(err)
			}
			actions[plan.Action]++
			s = next
			history = append(history, snapshot{at: now, bundle: s.Bundle, serving: s.Serving.Cert})
		}
		// Every replica serves the serving certificate of some moment in
		// the last replicaLag; the API server trusts the injected bundle of
		// some moment in the last apiLag.
		for dr := time.Duration(0); dr <= replicaLag; dr += step {
			presented := at(now.Add(-dr)).serving
			for da := time.Duration(0); da <= apiLag; da += step {
				trusted := at(now.Add(-injectLag - da)).bundle
				if now.Add(-injectLag-da).Before(t0) || now.Add(-dr).Before(t0) {
					continue // before the first certificate: not served yet
				}
				if err := verify(presented, trusted, now); err != nil {
					t.Fatalf("%s: a replica %s behind presents %s (issuer %s); the API server with the bundle of %s ago: %v",
						now.Sub(t0), dr, presented.SerialNumber.Text(16), presented.Issuer.CommonName, injectLag+da, err)
				}
			}
		}
	}
	// Two lifetimes of the CA: one CA renewal at least, several serving renewals, old CAs dropped.
	if actions[ActionRenewCA] < 1 || actions[ActionRenewServing] < 4 || actions[ActionUpdateBundle] < 1 || actions[ActionRecordInjection] < 1 {
		t.Errorf("actions over two CA lifetimes: %v", actions)
	}
}

func verify(cert *x509.Certificate, bundle []*x509.Certificate, now time.Time) error {
	pool := x509.NewCertPool()
	for _, ca := range bundle {
		pool.AddCert(ca)
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: "echelon-webhook.ops.svc"})
	return err
}

func TestServingSANs(t *testing.T) {
	tests := []struct {
		name                string
		service, ns, domain string
		extra               []string
		wantDNS             []string
		wantIPs             []string
	}{
		{
			name: "service in every form", service: "echelon-webhook", ns: "ops", domain: "cluster.local",
			wantDNS: []string{"echelon-webhook", "echelon-webhook.ops", "echelon-webhook.ops.svc", "echelon-webhook.ops.svc.cluster.local"},
		},
		{
			name: "extra IPs and names, duplicates dropped", service: "wh", ns: "ops", domain: "k8s.example",
			extra:   []string{"127.0.0.1", "wh.ops", "webhook.example.com", "::1", "127.0.0.1"},
			wantDNS: []string{"wh", "wh.ops", "wh.ops.svc", "wh.ops.svc.k8s.example", "webhook.example.com"},
			wantIPs: []string{"127.0.0.1", "::1"},
		},
		{
			name: "no cluster domain", service: "wh", ns: "ops",
			wantDNS: []string{"wh", "wh.ops", "wh.ops.svc"},
		},
		{
			name: "extra only", extra: []string{"127.0.0.1"},
			wantIPs: []string{"127.0.0.1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ServingSANs(tt.service, tt.ns, tt.domain, tt.extra)
			if strings.Join(got.DNSNames, ",") != strings.Join(tt.wantDNS, ",") {
				t.Errorf("DNS names = %v, want %v", got.DNSNames, tt.wantDNS)
			}
			var ips []string
			for _, ip := range got.IPs {
				ips = append(ips, ip.String())
			}
			if strings.Join(ips, ",") != strings.Join(tt.wantIPs, ",") {
				t.Errorf("IPs = %v, want %v", ips, tt.wantIPs)
			}
		})
	}
}

func TestSANsMatch(t *testing.T) {
	ca := mustCA(t, t0, testPolicy.CAValidity)
	cert := mustServing(t, t0, ca, SANs{DNSNames: []string{"a", "b"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	tests := []struct {
		name string
		sans SANs
		want bool
	}{
		{"same", SANs{DNSNames: []string{"a", "b"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, true},
		{"other order", SANs{DNSNames: []string{"b", "a"}, IPs: []net.IP{net.ParseIP("127.0.0.1").To4()}}, true},
		{"a name fewer", SANs{DNSNames: []string{"a"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, false},
		{"a name more", SANs{DNSNames: []string{"a", "b", "c"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}, false},
		{"other IP", SANs{DNSNames: []string{"a", "b"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}}, false},
		{"no IP", SANs{DNSNames: []string{"a", "b"}}, false},
	}
	for _, tt := range tests {
		if got := tt.sans.matches(cert.Cert); got != tt.want {
			t.Errorf("%s: matches = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNormalBundle(t *testing.T) {
	a := mustCA(t, t0, 10*time.Hour)
	b := mustCA(t, t0.Add(time.Hour), 10*time.Hour)
	c := mustCA(t, t0.Add(2*time.Hour), 10*time.Hour)
	tests := []struct {
		name    string
		current *keyPair
		bundle  []*x509.Certificate
		now     time.Time
		want    []*x509.Certificate
	}{
		{"already normal", c, bundleOf(c, b, a), t0.Add(3 * time.Hour), bundleOf(c, b, a)},
		{"current moved first", c, bundleOf(b, c), t0.Add(3 * time.Hour), bundleOf(c, b)},
		{"current added", c, bundleOf(b), t0.Add(3 * time.Hour), bundleOf(c, b)},
		{"duplicates dropped", c, bundleOf(c, b, b, c), t0.Add(3 * time.Hour), bundleOf(c, b)},
		{"expired dropped", c, bundleOf(c, b, a), t0.Add(10*time.Hour + time.Minute), bundleOf(c, b)},
		{"empty", a, nil, t0, bundleOf(a)},
	}
	for _, tt := range tests {
		if got := normalBundle(tt.current.Cert, tt.bundle, tt.now); !sameCerts(got, tt.want) {
			t.Errorf("%s: got %d CAs, want %d (%v)", tt.name, len(got), len(tt.want), names(got))
		}
	}
}

func names(certs []*x509.Certificate) []string {
	var n []string
	for _, c := range certs {
		n = append(n, c.Subject.CommonName)
	}
	return n
}

func TestSecretRoundTrip(t *testing.T) {
	oldCA := mustCA(t, t0, testPolicy.CAValidity)
	newCA := mustCA(t, t0.Add(time.Hour), testPolicy.CAValidity)
	want := State{CA: newCA, Bundle: bundleOf(newCA, oldCA), Serving: mustServing(t, t0, oldCA, testSANs), InjectedAt: t0.Add(2 * time.Hour)}
	secret := secretWith(want)
	got := ParseSecret(secret)
	if got.CA == nil || !got.CA.Cert.Equal(newCA.Cert) || !sameCerts(got.Bundle, want.Bundle) || got.Serving == nil ||
		!got.Serving.Cert.Equal(want.Serving.Cert) || !got.InjectedAt.Equal(want.InjectedAt) {
		t.Fatalf("round trip: got %+v", got)
	}

	// A record of injection for another bundle does not count.
	other := secretWith(State{CA: newCA, Bundle: bundleOf(newCA), Serving: want.Serving, InjectedAt: t0})
	secret.Annotations[InjectedAnnotation] = other.Annotations[InjectedAnnotation]
	if got := ParseSecret(secret); !got.InjectedAt.IsZero() {
		t.Errorf("injection recorded for another bundle read as %s", got.InjectedAt)
	}
	// Clearing the record removes the annotation.
	want.InjectedAt = time.Time{}
	want.writeTo(secret)
	if _, ok := secret.Annotations[InjectedAnnotation]; ok {
		t.Error("annotation kept after the record was cleared")
	}

	broken := []struct {
		name   string
		mutate func(data map[string][]byte)
		want   string
	}{
		{"no bundle", func(d map[string][]byte) { delete(d, KeyCABundle) }, "no ca.crt"},
		{"garbage bundle", func(d map[string][]byte) { d[KeyCABundle] = []byte("garbage") }, "no certificate"},
		{"CA key of another CA", func(d map[string][]byte) { d[KeyCAKey] = oldCA.KeyPEM }, "does not match"},
		{"serving certificate as CA", func(d map[string][]byte) {
			d[KeyCABundle] = want.Serving.CertPEM
			d[KeyCAKey] = want.Serving.KeyPEM
		}, "not a CA"},
	}
	for _, b := range broken {
		s := secretWith(want)
		b.mutate(s.Data)
		got := ParseSecret(s)
		if got.CA != nil || !strings.Contains(got.Problem, b.want) {
			t.Errorf("%s: CA %v, problem %q, want one containing %q", b.name, got.CA != nil, got.Problem, b.want)
		}
	}
	s := secretWith(want)
	s.Data[KeyServingKey] = oldCA.KeyPEM
	if got := ParseSecret(s); got.Serving != nil {
		t.Error("serving certificate with the wrong key read as usable")
	}
}

func secretWith(s State) *corev1.Secret {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "echelon-webhook-tls", Namespace: "ops"}, Type: corev1.SecretTypeTLS}
	s.writeTo(secret)
	return secret
}
