// Package egresstest opens the egress guard to loopback for tests, whose
// receivers, hooks and fake pods listen on 127.0.0.1. It opens loopback the
// way an administrator would, with the allowlist: the guard's default stays
// as strict as in production, and a test that does not ask keeps it.
package egresstest

import (
	"os"
	"strings"
	"testing"

	"github.com/echelon-operator/echelon/internal/egress"
)

// Loopback is the allowlist of tests: every loopback address.
var Loopback = []string{"127.0.0.0/8", "::1"}

// AllowFlag is the flag that gives an operator started by a test the same
// allowlist.
var AllowFlag = egress.AllowFlag + "=" + strings.Join(Loopback, ",")

// AllowLoopback makes the process's guard allow Loopback, for tests that run
// the controllers, hooks or webhooks in process against loopback servers.
func AllowLoopback() {
	g, err := egress.New(egress.Config{Allow: Loopback})
	if err != nil {
		panic(err)
	}
	egress.SetDefault(g)
}

// Main runs a package's tests with loopback allowed: the TestMain of a
// package whose test servers listen on loopback.
func Main(m *testing.M) {
	AllowLoopback()
	os.Exit(m.Run())
}
