package httptls_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/echelon-operator/echelon/internal/egress/egresstest"
)

// The test servers listen on loopback, which the egress guard refuses by
// default; the control plane some tests start is stopped at the end.
func TestMain(m *testing.M) {
	egresstest.AllowLoopback()
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
	}
	os.Exit(code)
}
