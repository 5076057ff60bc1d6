package framework

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildPlugin compiles the kubectl-echelon plugin from the repository at
// root into dir and returns its path, as BuildOperator does the operator.
func BuildPlugin(root, dir string) (string, error) {
	return goBuild(root, filepath.Join(dir, "kubectl-echelon"), "./cmd/kubectl-echelon", "-ldflags", "-X main.version=v0.0.0-e2e")
}

// PluginRun is one run of the plugin.
type PluginRun struct {
	Code   int
	Stdout string
	Stderr string
}

// RunPlugin runs the plugin with args and returns its exit code and output;
// an error only when it could not be run at all.
func RunPlugin(binary string, env []string, args ...string) (PluginRun, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run := PluginRun{Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		run.Code = exitErr.ExitCode()
	case err != nil:
		return run, err
	}
	return run, nil
}
