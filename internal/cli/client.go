package cli

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// scheme knows the Kubernetes types and Echelon's.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err) // only a programming error: a type registered twice
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// session is a client of the cluster the flags select and the namespace to
// work in: --namespace, else the context's, else "default".
type session struct {
	client    client.WithWatch
	namespace string
	host      string
}

func (o *options) session() (*session, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		return nil, explain(err, cfg.Host, "connect")
	}
	return &session{client: c, namespace: ns, host: cfg.Host}, nil
}
