package cli

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/echelon-operator/echelon/internal/kube"
)

// explain turns an error of the API into the one line a user acts on: what
// was asked, what went wrong, and where to look. what names the request,
// e.g. `get RolloutGroup "ingester" in namespace "demo"`.
func explain(err error, host, what string) error {
	var urlErr *url.Error
	var netErr net.Error
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err):
		return fmt.Errorf("%s: the echelon.dev/v1alpha1 API is not served by this cluster: Echelon's CRDs are not installed (see docs/install.md)", what)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: not found", what)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: not allowed: %s", what, kube.APIMessage(err))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the API server at %s did not accept the credentials of this kubeconfig: %s", what, host, kube.APIMessage(err))
	case errors.As(err, &urlErr), errors.As(err, &netErr):
		return fmt.Errorf("%s: cannot reach the Kubernetes API server at %s: %v", what, host, rootCause(err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// rootCause is the innermost error: a refused connection says more than the
// layers of requests wrapped around it.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// OneLine is an error as one line: what kubectl-echelon prints before it
// exits non-zero.
func OneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
