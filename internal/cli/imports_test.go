package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoControllerImport: the plugin plans on the observation
// internal/lookup gives, as the controllers do; it never imports a
// reconciler, whose package pulls in its manager wiring and watches.
func TestNoControllerImport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const controllers = "github.com/echelon-operator/echelon/controllers"
	for _, p := range strings.Fields(string(out)) {
		if p == controllers || strings.HasPrefix(p, controllers+"/") {
			t.Errorf("internal/cli depends on %s", p)
		}
	}
}
