package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/echelon-operator/echelon/internal/egress/egresstest"
)

// BuildOperator compiles the echelon binary from the repository at root into
// dir and returns its path. Tests run the real binary, as users do.
func BuildOperator(root, dir string) (string, error) {
	return goBuild(root, filepath.Join(dir, "echelon"), ".")
}

// goBuild compiles the package pkg of the module at root into out, with the
// extra go build flags given, and returns out.
func goBuild(root, out, pkg string, flags ...string) (string, error) {
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", filepath.Base(out), err, b)
	}
	return out, nil
}

// Operator is one echelon process.
type Operator struct {
	Name     string
	HTTPPort int
	LogFile  string

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// StartOperator starts binary with kubeconfig and extra flags, logging to a file
// in logDir. It picks a free HTTP port. The webhook server is off unless flags
// set --webhook-port (a later flag wins), since parallel operators would
// otherwise all bind its default port.
func StartOperator(binary, kubeconfig, logDir, name string, flags ...string) (*Operator, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--http-port=" + strconv.Itoa(port),
		"--http-bind-host=127.0.0.1",
		"--log-format=text",
		"--log-level=debug",
		"--webhook-port=0",
		// Tests run receivers, hooks, Prometheus and fake pods on
		// loopback, which the egress guard refuses by default; a test of
		// the default passes --egress-allow= after this.
		egresstest.AllowFlag,
	}, flags...)
	return StartProcess(Process{Name: name, Binary: binary, Args: args, LogDir: logDir, HTTPPort: port})
}

// Process says how to start a process: the echelon binary, or a control-plane
// component a test adds.
type Process struct {
	Name   string
	Binary string
	// Args are the whole command line after the binary; they must make it
	// serve HTTP on 127.0.0.1:HTTPPort.
	Args     []string
	HTTPPort int
	// Env is the environment; nil inherits the test's.
	Env []string
	// LogDir receives <Name>.log, the process's output.
	LogDir string
}

// StartProcess starts a process as p says, in its own process group
// and killed with the test binary, so that a test that dies leaves nothing
// running.
func StartProcess(p Process) (*Operator, error) {
	logFile := filepath.Join(p.LogDir, p.Name+".log")
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = p.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	op := &Operator{Name: p.Name, HTTPPort: p.HTTPPort, LogFile: logFile, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		op.mu.Lock()
		op.err = err
		op.mu.Unlock()
		close(op.done)
	}()
	return op, nil
}

// Get fetches a path of the operator's HTTP server.
func (o *Operator) Get(path string) (int, string, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", o.HTTPPort, path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// WaitReady waits until /ready answers 200.
func (o *Operator) WaitReady(ctx context.Context) error {
	for {
		if code, _, err := o.Get("/ready"); err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-o.done:
			return fmt.Errorf("%s exited before it was ready: %v\n%s", o.Name, o.ExitErr(), o.LogTail(40))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w\n%s", o.Name, ctx.Err(), o.LogTail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// IsLeader reports whether the process holds the leader Lease, from the
// leader_election_master_status metric controller-runtime exports.
func (o *Operator) IsLeader() bool {
	code, body, err := o.Get("/metrics")
	return err == nil && code == http.StatusOK &&
		bytes.Contains([]byte(body), []byte(`leader_election_master_status{name="echelon-leader"} 1`))
}

// Kill sends SIGKILL: the process gets no chance to clean up or hand over.
func (o *Operator) Kill() { o.signal(syscall.SIGKILL) }

// Stop sends SIGTERM and waits for a clean exit.
func (o *Operator) Stop(timeout time.Duration) error {
	o.signal(syscall.SIGTERM)
	select {
	case <-o.done:
		return o.ExitErr()
	case <-time.After(timeout):
		o.Kill()
		<-o.done
		return fmt.Errorf("%s did not stop within %s after SIGTERM", o.Name, timeout)
	}
}

// Exited is closed when the process has ended.
func (o *Operator) Exited() <-chan struct{} { return o.done }

// ExitErr is the error the process ended with (nil for exit code 0).
func (o *Operator) ExitErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *Operator) signal(sig syscall.Signal) {
	select {
	case <-o.done:
	default:
		_ = o.cmd.Process.Signal(sig)
	}
}

// LogTail returns the last lines of the operator's log.
func (o *Operator) LogTail(lines int) string {
	b, err := os.ReadFile(o.LogFile)
	if err != nil {
		return err.Error()
	}
	all := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return fmt.Sprintf("--- %s (last %d lines of %s) ---\n%s\n", o.Name, len(all), o.LogFile, bytes.Join(all, []byte("\n")))
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
