package soak

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/controlplane"
)

const (
	// webhookCertSecret is the Secret the operators share their self-signed
	// CA and serving certificate in, in the leader-election namespace.
	webhookCertSecret = "echelon-webhook-tls"
	// evictionWebhook and holdPartitionWebhook are the webhooks the soak
	// installs: the one that judges evictions with the groups' disruption
	// budgets, and the one that raises a RollingUpdate member's partition
	// in the write that changes its template (the soak's flips and reverts).
	evictionWebhook      = "eviction.echelon.dev"
	holdPartitionWebhook = "hold-partition.echelon.dev"
	// webhookConfiguration names the soak's webhook configuration.
	webhookConfiguration = "echelon-soak"
)

// webhookFlags make an instance serve the webhooks on a loopback port with
// a certificate naming 127.0.0.1, from the Secret every instance shares.
func webhookFlags(port int) []string {
	return []string{
		"--webhook-port=" + strconv.Itoa(port),
		"--webhook-bind-host=127.0.0.1",
		"--webhook-cert-extra-sans=127.0.0.1",
		"--webhook-cert-secret=" + webhookCertSecret,
	}
}

// balancer stands in for the operator's Service: it forwards each TCP
// connection (TLS passes through untouched) to one of the instances' webhook
// ports drawn at random, the next one when that refuses, as kube-proxy
// spreads connections over a Deployment's ready replicas. With no instance
// listening (both replaced at once) the connection is closed, and the API
// server applies the webhook's failure policy (Fail: the eviction is
// refused).
type balancer struct {
	ln net.Listener

	mu       sync.Mutex
	backends []int
}

func newBalancer() (*balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &balancer{ln: ln}
	go b.serve()
	return b, nil
}

func (b *balancer) port() int { return b.ln.Addr().(*net.TCPAddr).Port }

func (b *balancer) close() { _ = b.ln.Close() }

// setBackends replaces the webhook ports connections go to.
func (b *balancer) setBackends(ports []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append([]int(nil), ports...)
}

func (b *balancer) serve() {
	for {
		conn, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.forward(conn)
	}
}

func (b *balancer) forward(in net.Conn) {
	defer in.Close()
	b.mu.Lock()
	ports := append([]int(nil), b.backends...)
	b.mu.Unlock()
	rand.Shuffle(len(ports), func(i, j int) { ports[i], ports[j] = ports[j], ports[i] })
	for _, p := range ports {
		out, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second)
		if err != nil {
			continue
		}
		defer out.Close()
		done := make(chan struct{}, 2)
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			done <- struct{}{}
		}
		go pipe(out, in)
		go pipe(in, out)
		<-done
		<-done
		return
	}
}

// grantWebhooks gives the operator's user what the chart grants a release
// with webhooks: its certificate Secret in certNamespace, and the patch of
// the soak's webhook configuration (CA injection). Before the operators
// start: they create the Secret as they start.
func grantWebhooks(ctx context.Context, cp *controlplane.ControlPlane, user, certNamespace string) error {
	if err := cp.GrantWebhookCerts(ctx, user, certNamespace); err != nil {
		return err
	}
	return cp.GrantWebhookConfigurations(ctx, user, webhookConfiguration)
}

// installWebhooks registers the generated hold-partition webhook, and with
// evictions the eviction webhook, for the soak's namespaces, calling the
// balancer, and waits until the operators have injected their CA. remove
// deletes them: once the operators stop, the eviction webhook's failure
// policy would refuse every eviction in those namespaces.
func installWebhooks(ctx context.Context, cp *controlplane.ControlPlane, certNamespace string, namespaces []string, port int, evictions bool) (remove func(), err error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: namespaces}}}
	url := func(path string) string { return fmt.Sprintf("https://127.0.0.1:%d%s", port, path) }
	objs, err := framework.WebhookConfigurations(data, webhookConfiguration, certNamespace, webhookCertSecret, sel, url,
		func(name string) bool { return name == holdPartitionWebhook || (evictions && name == evictionWebhook) })
	if err != nil {
		return nil, err
	}
	want := 1 // the mutating configuration, and with evictions the validating one
	if evictions {
		want = 2
	}
	if len(objs) != want {
		return nil, fmt.Errorf("config/webhook/manifests.yaml: want %d configurations holding %s (and with evictions %s), got %d", want, holdPartitionWebhook, evictionWebhook, len(objs))
	}
	c := cp.Client()
	remove = func() {
		for _, o := range objs {
			_ = c.Delete(context.WithoutCancel(ctx), o)
		}
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			remove()
			return nil, err
		}
	}
	if err := framework.WaitCAInjected(ctx, c, objs, 2*time.Minute); err != nil {
		remove()
		return nil, err
	}
	return remove, nil
}
