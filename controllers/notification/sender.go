package notification

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/httptls"
)

// maxErrorBody bounds the part of an error answer quoted in status.
const maxErrorBody = 200

// target is where one receiver's messages go, read from its Secret.
type target struct {
	url, token string
	timeout    time.Duration
}

// sender reads receivers' Secrets and posts to them.
type sender struct {
	secrets client.Reader
	client  *http.Client
}

func newSender(secrets client.Reader) *sender {
	return &sender{secrets: secrets, client: &http.Client{
		Transport: httptls.Plain(),
		// A redirect is not followed: the Secret names the endpoint, and a
		// token must not go anywhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// resolve reads the Secret name (of field) live: the operator's generated
// RBAC grants no right on Secrets, and whoever installs it grants get where
// groups name Secrets (config/rbac/analysis_secrets_role.yaml, the chart's
// rbac.analysisSecretNamespaces). Errors name the field and never quote the
// URL, which is a credential; reason is the NotificationsDelivered reason.
func (s *sender) resolve(ctx context.Context, namespace, field, name string, timeout time.Duration) (_ *target, reason string, _ error) {
	field += ".secretRef"
	secret := &corev1.Secret{}
	if err := s.secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, secret); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, v1alpha1.ReasonSecretUnreadable, fmt.Errorf("%s: Secret %s not found in namespace %s", field, name, namespace)
		case apierrors.IsForbidden(err):
			return nil, v1alpha1.ReasonSecretUnreadable, fmt.Errorf("%s: the operator may not read Secret %s in namespace %s: grant it get on Secrets there (Helm value rbac.analysisSecretNamespaces)", field, name, namespace)
		}
		return nil, v1alpha1.ReasonSecretUnreadable, fmt.Errorf("%s: read Secret %s: %w", field, name, err)
	}
	raw, ok := secret.Data[v1alpha1.NotificationSecretURLKey]
	if !ok {
		return nil, v1alpha1.ReasonSecretUnreadable, fmt.Errorf("%s: Secret %s has no key %q", field, name, v1alpha1.NotificationSecretURLKey)
	}
	u, err := url.Parse(strings.TrimSpace(string(raw)))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, v1alpha1.ReasonInvalidURL, fmt.Errorf("%s: key %q of Secret %s is not an http:// or https:// URL", field, v1alpha1.NotificationSecretURLKey, name)
	}
	return &target{url: u.String(), token: strings.TrimSpace(string(secret.Data[v1alpha1.NotificationSecretTokenKey])), timeout: timeout}, "", nil
}

// post sends body to t within its timeout; any answer but 2xx is an error.
func (s *sender) post(ctx context.Context, t *target, body []byte, headers map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return errors.New("cannot build the request")
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// A *url.Error quotes the URL, a credential: keep only its cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s", t.timeout)
		}
		return err
	}
	defer resp.Body.Close()
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := fmt.Sprintf("HTTP %s", resp.Status)
		if s := strings.TrimSpace(string(excerpt)); s != "" {
			msg += ": " + s
		}
		return errors.New(msg)
	}
	return nil
}
