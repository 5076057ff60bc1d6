package httptls_test

import (
	"testing"

	"github.com/echelon-operator/echelon/internal/egress/egresstest"
)

// The test servers listen on loopback, which the egress guard refuses by
// default.
func TestMain(m *testing.M) { egresstest.Main(m) }
