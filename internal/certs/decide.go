package certs

import (
	"crypto/x509"
	"fmt"
	"slices"
	"time"
)

// Action is what Decide asks of the Secret.
type Action string

const (
	// ActionNone: the Secret is as it should be until Plan.Next.
	ActionNone Action = "None"
	// ActionCreate: a new CA and serving certificate replace whatever is there
	// (nothing, or nothing usable, or an expired CA).
	ActionCreate Action = "Create"
	// ActionRenewCA: a new CA becomes current and joins the bundle ahead of the
	// old one; the serving certificate stays as it is for now.
	ActionRenewCA Action = "RenewCA"
	// ActionUpdateBundle: the bundle is rewritten as the current CA followed by
	// the other CAs that have not expired.
	ActionUpdateBundle Action = "UpdateBundle"
	// ActionRecordInjection: the current bundle has reached every labelled
	// webhook configuration; record when, on the Secret.
	ActionRecordInjection Action = "RecordInjection"
	// ActionRenewServing: a new serving certificate, signed by the current CA.
	ActionRenewServing Action = "RenewServing"
)

// Policy is what the Secret should hold.
type Policy struct {
	CertValidity time.Duration
	CAValidity   time.Duration
	// Propagation is how long after the bundle was seen in every webhook
	// configuration the API server is assumed to use it: its webhook clients
	// read the configurations through an informer, a moment behind.
	Propagation time.Duration
	SANs        SANs
}

// Plan is Decide's answer.
type Plan struct {
	Action Action
	// Reason says why, for logs.
	Reason string
	// Next is when to decide again if nothing changes before, always later
	// than the time decided at; set only with ActionNone.
	Next time.Time
}

// Decide says what to do with the Secret's State at now. injected says whether
// every labelled webhook configuration carries the State's bundle.
//
// The order of the checks is the rotation sequence of the package doc: a CA
// is renewed first and alone; the bundle then carries the old and new CA; the
// serving certificate moves to the new CA only once that bundle is injected
// and has had Propagation to reach the API server; the old CA leaves the bundle
// when it expires.
func Decide(now time.Time, s State, injected bool, p Policy) Plan {
	if s.CA == nil {
		return Plan{Action: ActionCreate, Reason: s.Problem}
	}
	if expired(s.CA.Cert, now) {
		return Plan{Action: ActionCreate, Reason: fmt.Sprintf("CA expired at %s", s.CA.Cert.NotAfter.Format(time.RFC3339))}
	}
	if !now.Before(renewAt(s.CA.Cert)) {
		return Plan{Action: ActionRenewCA, Reason: fmt.Sprintf("CA is past two thirds of its lifetime (%s)", renewAt(s.CA.Cert).Format(time.RFC3339))}
	}
	if want := normalBundle(s.CA.Cert, s.Bundle, now); !sameCerts(want, s.Bundle) {
		return Plan{Action: ActionUpdateBundle, Reason: fmt.Sprintf("bundle of %d CAs becomes %d: the current CA first, expired CAs dropped", len(s.Bundle), len(want))}
	}
	if reason := unusable(s.Serving, s.Bundle, now); reason != "" {
		return Plan{Action: ActionRenewServing, Reason: reason}
	}
	if !signedBy(s.Serving.Cert, s.CA.Cert) {
		// A CA rotation in progress: the serving certificate is signed by the
		// previous CA, which clients still trust. Its renewal time may have
		// passed; it waits, so the next look is due at its expiry at the latest.
		next := earliest(renewAt(s.CA.Cert), s.Serving.Cert.NotAfter, oldestExpiry(s.Bundle[1:]))
		switch {
		case !injected:
			return Plan{Action: ActionNone, Reason: "waiting for the bundle with the new CA to reach every labelled webhook configuration", Next: next}
		case s.InjectedAt.IsZero():
			return Plan{Action: ActionRecordInjection, Reason: "the bundle with the new CA is in every labelled webhook configuration"}
		case now.Before(s.InjectedAt.Add(p.Propagation)):
			return Plan{Action: ActionNone, Reason: "giving the API server time to use the injected bundle", Next: earliest(next, s.InjectedAt.Add(p.Propagation))}
		default:
			return Plan{Action: ActionRenewServing, Reason: "the bundle with the new CA is in use: the serving certificate moves to the new CA"}
		}
	}
	if !p.SANs.matches(s.Serving.Cert) {
		return Plan{Action: ActionRenewServing, Reason: fmt.Sprintf("serving certificate names %v %v, want %v %v", s.Serving.Cert.DNSNames, s.Serving.Cert.IPAddresses, p.SANs.DNSNames, p.SANs.IPs)}
	}
	if !now.Before(renewAt(s.Serving.Cert)) {
		return Plan{Action: ActionRenewServing, Reason: fmt.Sprintf("serving certificate is past two thirds of its lifetime (%s)", renewAt(s.Serving.Cert).Format(time.RFC3339))}
	}
	return Plan{Action: ActionNone, Next: earliest(renewAt(s.CA.Cert), renewAt(s.Serving.Cert), oldestExpiry(s.Bundle[1:]))}
}

// unusable says why the serving certificate cannot serve, or "" if it can:
// missing, expired, or not signed by a CA of the bundle that is still valid.
// Replacing an unusable certificate cannot drop a request that would have
// succeeded, so it needs none of the care of a rotation.
func unusable(serving *keyPair, bundle []*x509.Certificate, now time.Time) string {
	switch {
	case serving == nil:
		return "no usable serving certificate"
	case expired(serving.Cert, now):
		return fmt.Sprintf("serving certificate expired at %s", serving.Cert.NotAfter.Format(time.RFC3339))
	case !slices.ContainsFunc(bundle, func(ca *x509.Certificate) bool { return !expired(ca, now) && signedBy(serving.Cert, ca) }):
		return "serving certificate is not signed by a valid CA of the bundle"
	}
	return ""
}

// normalBundle is the bundle as it should be: current first, then the other
// CAs in their order, without duplicates and without those expired at now. An
// old CA stays until it expires: its key is gone, so it signs nothing new, and
// expiry is the one moment after which no replica, however far behind, can
// still serve a certificate it signed.
func normalBundle(current *x509.Certificate, bundle []*x509.Certificate, now time.Time) []*x509.Certificate {
	out := []*x509.Certificate{current}
	for _, ca := range bundle {
		if expired(ca, now) || slices.ContainsFunc(out, func(c *x509.Certificate) bool { return c.Equal(ca) }) {
			continue
		}
		out = append(out, ca)
	}
	return out
}

// oldestExpiry is the earliest NotAfter of certs; zero when there are none.
func oldestExpiry(certs []*x509.Certificate) time.Time {
	var t time.Time
	for _, c := range certs {
		t = earliest(t, c.NotAfter)
	}
	return t
}

// earliest is the earliest non-zero time of ts; zero when all are zero.
func earliest(ts ...time.Time) time.Time {
	var e time.Time
	for _, t := range ts {
		if !t.IsZero() && (e.IsZero() || t.Before(e)) {
			e = t
		}
	}
	return e
}

// apply returns the State that carries out plan's action on s at now.
func apply(action Action, s State, now time.Time, p Policy) (State, error) {
	switch action {
	case ActionCreate:
		ca, err := newCA(now, p.CAValidity)
		if err != nil {
			return s, err
		}
		serving, err := newServing(now, p.CertValidity, ca, p.SANs)
		if err != nil {
			return s, err
		}
		return State{CA: ca, Bundle: []*x509.Certificate{ca.Cert}, Serving: serving}, nil
	case ActionRenewCA:
		ca, err := newCA(now, p.CAValidity)
		if err != nil {
			return s, err
		}
		return State{CA: ca, Bundle: normalBundle(ca.Cert, s.Bundle, now), Serving: s.Serving}, nil
	case ActionUpdateBundle:
		return State{CA: s.CA, Bundle: normalBundle(s.CA.Cert, s.Bundle, now), Serving: s.Serving}, nil
	case ActionRecordInjection:
		s.InjectedAt = now
		return s, nil
	case ActionRenewServing:
		serving, err := newServing(now, p.CertValidity, s.CA, p.SANs)
		if err != nil {
			return s, err
		}
		s.Serving = serving
		return s, nil
	}
	return s, fmt.Errorf("no change to make for action %q", action)
}
