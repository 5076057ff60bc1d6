/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package nodetier

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// state is what a run must undo, saved before anything is started so that a
// run killed at any point is swept by the next one.
type state struct {
	// Owner is the PID of the test binary outside the namespace.
	Owner int
	// Name names the network namespace and the run.
	Name string
	// Scratch holds everything the run writes where it has a choice: the
	// control plane's files aside, containerd's root and state, the kubelet's
	// root, CNI's IP allocations, the images.
	Scratch string
	// Sysctls are the machine-wide kernel settings the kubelet sets at start
	// (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops), with their
	// values before the run.
	Sysctls map[string]string
	// Created are the paths the kubelet, containerd and the CNI plugins write
	// whatever their configuration says, which did not exist before the run.
	Created []string
}

// kernelSettings are the sysctls the kubelet changes machine-wide.
var kernelSettings = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

// fixedPaths are written by the kubelet, containerd and CNI whatever their
// configuration says.
var fixedPaths = []string{
	"/var/log/pods", "/var/log/containers", "/var/lib/kubelet", "/var/lib/cni",
	"/run/containerd", "/run/netns", "/etc/kubernetes", "/run/kubernetes",
}

// cgroupRoots are the containers' cgroup parents, in every hierarchy:
// containerd names them after its namespace when the kubelet gives none
// (cgroupsPerQOS: false).
func cgroupRoots() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	// Every hierarchy, the v2 one mounted beside v1's included.
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	for _, c := range hierarchies {
		root := filepath.Join(filepath.Dir(c), "k8s.io")
		if !contains(roots, root) {
			roots = append(roots, root)
		}
	}
	return roots
}

func (s *state) record() {
	s.Sysctls = map[string]string{}
	for _, k := range kernelSettings {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	for _, p := range append(append([]string(nil), fixedPaths...), cgroupRoots()...) {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			s.Created = append(s.Created, p)
		}
	}
}

func (s *state) save(dir string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "state.json"), data, 0o600)
}

func loadState(dir string) (*state, error) {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if s.Name == "" || !strings.HasPrefix(filepath.Base(s.Scratch), "echelon-node-") {
		return nil, fmt.Errorf("%s: not a node tier run", dir)
	}
	return &s, nil
}

// restoreSysctls puts back the kernel settings the kubelet changed.
func (s *state) restoreSysctls() error {
	var errs []error
	for k, v := range s.Sysctls {
		path := filepath.Join("/proc/sys", k)
		if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// undo removes everything of the run, in an order where each step can
// succeed: processes, then mounts, cgroups, the namespace, then files.
func (s *state) undo() error {
	var errs []error
	containers := s.containerIDs()
	errs = append(errs, s.killProcesses(containers))
	errs = append(errs, s.unmount())
	errs = append(errs, removeContainerCgroups(containers))
	if _, err := os.Stat(netnsPath(s.Name)); err == nil {
		if out, err := exec.Command("ip", "netns", "delete", s.Name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns delete %s: %v: %s", s.Name, err, out))
		}
	}
	errs = append(errs, s.restoreSysctls())
	for _, p := range s.Created {
		if strings.HasPrefix(p, "/sys/fs/cgroup/") {
			if err := syscall.Rmdir(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", p, err))
			}
			continue
		}
		if p == "/run/netns" && s.otherNamespaces() {
			continue // another tool made a namespace since
		}
		_ = syscall.Unmount(p, syscall.MNT_DETACH) // `ip netns` bind-mounts /run/netns on itself
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, os.RemoveAll(s.Scratch))
	return errors.Join(errs...)
}

func (s *state) otherNamespaces() bool {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if e.Name() != s.Name {
			return true
		}
	}
	return false
}

// containerIDs are the IDs of the containers and sandboxes containerd ran,
// read from its state directory, which names each task's bundle.
func (s *state) containerIDs() []string {
	entries, _ := os.ReadDir(filepath.Join(s.Scratch, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io"))
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// killProcesses kills every process of the run: those started with a path in
// the scratch directory (containerd, its shims, the kubelet, the control
// plane's launchers), those in the run's network namespace, and those in a
// cgroup of one of its containers. It waits for them to be gone, for at most
// ten seconds.
func (s *state) killProcesses(containers []string) error {
	var netnsIno uint64
	if fi, err := os.Stat(netnsPath(s.Name)); err == nil {
		netnsIno = fi.Sys().(*syscall.Stat_t).Ino
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := s.processes(netnsIno, containers)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still running", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *state) processes(netnsIno uint64, containers []string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || pid == 1 {
			continue
		}
		proc := filepath.Join("/proc", e.Name())
		cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
		if err != nil || len(cmdline) == 0 { // gone, or a kernel thread
			continue
		}
		if strings.Contains(string(cmdline), s.Scratch) {
			pids = append(pids, pid)
			continue
		}
		if netnsIno != 0 {
			if link, err := os.Readlink(filepath.Join(proc, "ns", "net")); err == nil && link == fmt.Sprintf("net:[%d]", netnsIno) {
				pids = append(pids, pid)
				continue
			}
		}
		if cgroups, err := os.ReadFile(filepath.Join(proc, "cgroup")); err == nil {
			for _, id := range containers {
				if strings.Contains(string(cgroups), "/k8s.io/"+id+"\n") {
					pids = append(pids, pid)
					break
				}
			}
		}
	}
	return pids
}

// unmount detaches every mount under the scratch directory (overlay
// snapshots, the pods' volumes and network namespaces), deepest first.
func (s *state) unmount() error {
	var errs []error
	for range 3 { // a detached mount can reveal one below it
		mounts := mountsUnder(s.Scratch)
		if len(mounts) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	if left := mountsUnder(s.Scratch); len(left) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %v", left))
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points under dir, longest first.
func mountsUnder(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var mounts []string
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		// Mount points escape spaces and the like as octal; ours have none.
		if p := fields[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			mounts = append(mounts, p)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts
}

// removeContainerCgroups removes the containers' cgroups, once their
// processes are gone.
func removeContainerCgroups(containers []string) error {
	var errs []error
	for _, root := range cgroupRoots() {
		for _, id := range containers {
			err := syscall.Rmdir(filepath.Join(root, id))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", filepath.Join(root, id), err))
			}
		}
	}
	return errors.Join(errs...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
