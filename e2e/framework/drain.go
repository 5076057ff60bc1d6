package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Drain is a `kubectl drain` running in the background, as an administrator
// runs it: the real binary, its output captured as it comes.
type Drain struct {
	Node    string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}

	mu       sync.Mutex
	out      bytes.Buffer
	err      error
	finished time.Time
}

// lockedWriter appends to a drain's output under its lock.
type lockedWriter struct{ d *Drain }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.d.out.Write(p)
}

// StartDrain starts `kubectl drain node` with the flags a drain of a
// StatefulSet node needs and kubectl's own timeout. Kill stops it.
func StartDrain(ctx context.Context, kubectl, kubeconfig, node string, timeout time.Duration) (*Drain, error) {
	d := &Drain{Node: node, done: make(chan struct{})}
	d.cmd = exec.CommandContext(ctx, kubectl, "--kubeconfig="+kubeconfig, "drain", node,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout="+timeout.String())
	d.cmd.Stdout, d.cmd.Stderr = lockedWriter{d}, lockedWriter{d}
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kubectl drain %s: %w", node, err)
	}
	go func() {
		err := d.cmd.Wait()
		d.mu.Lock()
		d.err, d.finished = err, time.Now()
		d.mu.Unlock()
		close(d.done)
	}()
	return d, nil
}

// Kill stops kubectl if it still runs and waits for it.
func (d *Drain) Kill() {
	if d.cmd.Process != nil {
		_ = d.cmd.Process.Kill()
	}
	<-d.done
}

// Output is what the drain printed so far.
func (d *Drain) Output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// Done is closed once kubectl has exited.
func (d *Drain) Done() <-chan struct{} { return d.done }

// Finished is when kubectl exited; zero while it runs.
func (d *Drain) Finished() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.finished
}

// Wait waits until kubectl exits, at most timeout, and returns how long the
// drain took, or an error with its output unless it drained the node.
func (d *Drain) Wait(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-d.done:
	case <-ctx.Done():
		return 0, fmt.Errorf("drain of %s: %w; output so far:\n%s", d.Node, ctx.Err(), d.Output())
	case <-timer.C:
		return 0, fmt.Errorf("drain of %s still running after %s; output so far:\n%s", d.Node, timeout, d.Output())
	}
	d.mu.Lock()
	err, took := d.err, d.finished.Sub(d.started)
	d.mu.Unlock()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return took, fmt.Errorf("kubectl drain %s failed (%w) after %s:\n%s", d.Node, err, took, d.Output())
	}
	if err != nil {
		return took, err
	}
	if !strings.Contains(d.Output(), "node/"+d.Node+" drained") {
		return took, fmt.Errorf("kubectl drain %s exited without reporting the node drained:\n%s", d.Node, d.Output())
	}
	return took, nil
}

// Refusals returns the lines in which kubectl reports an eviction refused
// with 429 and retried: "error when evicting pods/... (will retry after 5s): ...".
func (d *Drain) Refusals() []string {
	var out []string
	for _, line := range strings.Split(d.Output(), "\n") {
		if strings.Contains(line, "will retry after") {
			out = append(out, line)
		}
	}
	return out
}
