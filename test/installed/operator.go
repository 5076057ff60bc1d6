/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package installed

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/egress/egresstest"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// containerName is the operator's container in the chart's Deployment.
const containerName = "operator"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds the echelon binary once per test process and returns its
// path: the same source the image is built from.
func Binary() (string, error) {
	buildOnce.Do(func() {
		root, err := controlplane.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "echelon-installed-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "echelon")
		cmd := exec.Command("go", "build", "-o", buildPath, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build echelon: %w\n%s", err, out)
		}
	})
	return buildPath, buildErr
}

// Operator is an echelon process started from an installation's Deployment.
type Operator struct {
	// Namespace and Deployment name where it is installed.
	Namespace, Deployment string
	// Args are the command line it runs with: the Deployment's, then
	// --kubeconfig and the local HTTP address.
	Args []string
	// ServiceAccount it authenticates as.
	ServiceAccount string
	// WebhookPort is the loopback port it serves the admission webhooks on;
	// 0 when the Deployment turns the webhook server off.
	WebhookPort int
	// instance is the Deployment's app.kubernetes.io/instance label, which
	// the installation's webhook configurations carry too.
	instance string
	// Operator is the process: its HTTP port (/metrics, /healthz and /ready on
	// 127.0.0.1), readiness, log and signals.
	*framework.Operator
}

// StartFromDeployment reads the Deployment namespace/name with admin and starts
// the binary as one of its pods would run: the operator container's arguments
// and environment (downward-API fields resolved), authenticated by a token of
// the pod's ServiceAccount. Only the HTTP address differs, since the process
// shares this machine with others: it listens on a free port of 127.0.0.1, and
// so does its webhook server (see RouteWebhooks), whose certificate files, in
// the chart's certManager and secret modes, are read from their Secret as the
// kubelet would mount them. The process is stopped when the test ends, and its
// log printed if the test failed.
func StartFromDeployment(t controlplane.TB, admin *rest.Config, binary, namespace, name string) (*Operator, error) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	deploy, err := cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the installed Deployment %s/%s: %w", namespace, name, err)
	}
	container, err := operatorContainer(deploy)
	if err != nil {
		return nil, err
	}
	env, err := containerEnv(container, deploy)
	if err != nil {
		return nil, err
	}
	sa := deploy.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	dir, err := os.MkdirTemp("", "echelon-operator-")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeServiceAccountKubeconfig(ctx, cs, admin, namespace, sa, kubeconfig); err != nil {
		return nil, err
	}
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	args, err := mountSecretVolumes(ctx, cs, deploy, container, container.Args, dir)
	if err != nil {
		return nil, err
	}
	webhookPort, webhookArgs, err := webhookFlags(args)
	if err != nil {
		return nil, err
	}
	args = append(append(args,
		"--kubeconfig="+kubeconfig,
		"--http-port="+strconv.Itoa(port),
		"--http-bind-host=127.0.0.1",
		// The tests' hooks and pods listen on loopback, which the guard
		// refuses by default.
		egresstest.AllowFlag,
	), webhookArgs...)
	proc, err := framework.StartProcess(framework.Process{Name: "echelon-" + namespace, Binary: binary, Args: args, Env: env, LogDir: dir, HTTPPort: port})
	if err != nil {
		return nil, err
	}
	op := &Operator{Namespace: namespace, Deployment: name, Args: args, ServiceAccount: sa, WebhookPort: webhookPort,
		instance: deploy.Labels[instanceLabel], Operator: proc}
	t.Cleanup(func() {
		op.Stop()
		if t.Failed() {
			t.Logf("%s", op.LogTail(60))
		}
	})
	return op, nil
}

func operatorContainer(deploy *appsv1.Deployment) (*corev1.Container, error) {
	for i := range deploy.Spec.Template.Spec.Containers {
		c := &deploy.Spec.Template.Spec.Containers[i]
		if c.Name == containerName {
			if len(c.Command) > 0 {
				return nil, fmt.Errorf("container %s sets command %v: this package runs the image's entrypoint (echelon) with the container's args", c.Name, c.Command)
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("Deployment %s/%s has no container %q", deploy.Namespace, deploy.Name, containerName)
}

// containerEnv is the process environment: PATH and HOME of the test, then the
// container's variables. The downward API fields the operator uses are
// resolved as the kubelet would; anything else fails, so that an addition to
// the chart is noticed here instead of silently missing.
func containerEnv(c *corev1.Container, deploy *appsv1.Deployment) ([]string, error) {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %s uses envFrom, which this package does not resolve", c.Name)
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+deploy.Namespace)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+deploy.Name+"-local")
		default:
			return nil, fmt.Errorf("container %s: env %s comes from %+v, which this package does not resolve", c.Name, e.Name, e.ValueFrom)
		}
	}
	return env, nil
}

// writeServiceAccountKubeconfig asks the API server for a token of the
// ServiceAccount, as the kubelet does for a pod, and writes a kubeconfig with it.
func writeServiceAccountKubeconfig(ctx context.Context, cs kubernetes.Interface, admin *rest.Config, namespace, sa, path string) error {
	expiry := int64(time.Hour / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for ServiceAccount %s/%s: %w", namespace, sa, err)
	}
	caData := admin.CAData
	if len(caData) == 0 && admin.CAFile != "" {
		if caData, err = os.ReadFile(admin.CAFile); err != nil {
			return err
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: caData}
	cfg.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["operator"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "operator", Namespace: namespace}
	cfg.CurrentContext = "operator"
	return clientcmd.WriteToFile(*cfg, path)
}

// WaitLeader waits until the process holds its leader Lease, as its
// leader_election_master_status metric says.
func (o *Operator) WaitLeader(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		select {
		case <-o.Exited():
			return false, fmt.Errorf("%s exited: %v\n%s", o.Name, o.ExitErr(), o.LogTail(30))
		default:
		}
		_, body, err := o.Get("/metrics")
		if err != nil {
			return false, nil
		}
		for line := range strings.Lines(body) {
			if strings.HasPrefix(line, "leader_election_master_status{") && strings.HasSuffix(strings.TrimSpace(line), " 1") {
				return true, nil
			}
		}
		return false, nil
	})
}

// Metrics returns the text of /metrics.
func (o *Operator) Metrics() (string, error) {
	code, body, err := o.Get("/metrics")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("/metrics answered %d", code)
	}
	return body, err
}

// Stop stops the process: SIGTERM, then SIGKILL after stopGrace. Stopping it
// twice (the test, then its cleanup) is harmless.
func (o *Operator) Stop() { _ = o.Operator.Stop(stopGrace) }

// startTimeout bounds how long an operator may take to sync its caches and
// take its Lease; seconds are usual.
const startTimeout = 2 * time.Minute

// Run builds the binary (once), starts it from the Deployment namespace/name
// of the control plane (StartFromDeployment), waits until it is ready and
// holds its leader Lease, and sends the installation's webhooks to it
// (RouteWebhooks), failing the test otherwise.
func Run(t controlplane.TB, cp *controlplane.ControlPlane, namespace, name string) *Operator {
	t.Helper()
	binary, err := Binary()
	if err != nil {
		t.Fatalf("%v", err)
	}
	op, err := StartFromDeployment(t, cp.Config(), binary, namespace, name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := op.WaitReady(ctx); err != nil {
		t.Fatalf("%v", err)
	}
	if err := op.WaitLeader(ctx); err != nil {
		t.Fatalf("operator from %s/%s never took its leader Lease (its Lease RBAC, POD_NAMESPACE?): %v\n%s", namespace, name, err, op.LogTail(40))
	}
	cs, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		t.Fatalf("%v", err)
	}
	if err := op.RouteWebhooks(ctx, cs); err != nil {
		t.Fatalf("operator from %s/%s: %v", namespace, name, err)
	}
	return op
}
