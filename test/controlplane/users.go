/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// OperatorRBACFile is the RBAC generated from the operator's kubebuilder
	// markers (`make manifests`), relative to the repository root. E2E tests run
	// the operator bound to it and nothing else, so a missing marker fails there.
	OperatorRBACFile = "config/rbac/role.yaml"

	// LeaderElectionRBACFile is the operator's leader-election Role (its Lease
	// and Events), relative to the repository root; see GrantLeaderElection.
	LeaderElectionRBACFile = "config/rbac/leader_election_role.yaml"

	// fieldOwner names this package in managedFields of what it applies.
	fieldOwner = "echelon-test-controlplane"
)

// User is a client identity of the control plane, authenticated by a client
// certificate that envtest issues.
type User struct {
	Name   string
	Groups []string
	// Kubeconfig is the path of a kubeconfig file for this user, e.g. for the
	// operator's --kubeconfig or for kubectl.
	Kubeconfig string
	// Config is the same identity for Go clients.
	Config *rest.Config
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// NewUser issues a client certificate for name in groups and writes a kubeconfig
// for it. The API server authorizes with RBAC only, so the user can do nothing
// until bound to a role (see BindRBAC) unless a group such as system:masters
// grants it.
func (cp *ControlPlane) NewUser(name string, groups ...string) (*User, error) {
	authn, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, &rest.Config{QPS: clientQPS, Burst: clientBurst})
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", name, err)
	}
	kubeconfig, err := authn.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig for user %s: %w", name, err)
	}
	cp.mu.Lock()
	cp.users++
	file := filepath.Join(cp.dir, "kubeconfigs", fmt.Sprintf("%03d-%s.kubeconfig", cp.users, unsafeFileChars.ReplaceAllString(name, "_")))
	cp.mu.Unlock()
	if err := os.WriteFile(file, kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig for user %s: %w", name, err)
	}
	return &User{Name: name, Groups: groups, Kubeconfig: file, Config: authn.Config()}, nil
}

// NewOperatorUser creates a user bound to the operator's generated RBAC
// (OperatorRBACFile) and to nothing else: the identity e2e tests run the
// operator as, so that the tests prove the RBAC markers are complete.
func (cp *ControlPlane) NewOperatorUser(ctx context.Context, name string) (*User, error) {
	user, err := cp.NewUser(name)
	if err != nil {
		return nil, err
	}
	if err := cp.BindRBAC(ctx, name, OperatorRBACFile); err != nil {
		return nil, err
	}
	return user, nil
}

// GrantLeaderElection binds the user to the operator's leader-election Role
// (LeaderElectionRBACFile) in namespace, where the operator keeps its Lease
// (--leader-election-namespace). The operator holds no Lease rights elsewhere.
func (cp *ControlPlane) GrantLeaderElection(ctx context.Context, user, namespace string) error {
	return cp.grantRolesIn(ctx, user, LeaderElectionRBACFile, namespace)
}

// GrantWebhookConfigurations lets user patch the webhook configurations of the
// given names, as an install whose configurations are not named echelon grants
// it (docs/webhooks.md, "Renamed configurations"): the generated RBAC limits
// patch to that name, and tests name theirs per namespace.
func (cp *ControlPlane) GrantWebhookConfigurations(ctx context.Context, user string, names ...string) error {
	for _, name := range names {
		role := &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: "webhook-ca-injection-" + unsafeFileChars.ReplaceAllString(name, "-")},
			Rules: []rbacv1.PolicyRule{{
				APIGroups:     []string{"admissionregistration.k8s.io"},
				Resources:     []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"},
				ResourceNames: []string{name},
				Verbs:         []string{"patch"},
			}},
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(role)
		if err != nil {
			return err
		}
		if err := cp.bindRole(ctx, user, "webhook configuration "+name, &unstructured.Unstructured{Object: obj}); err != nil {
			return err
		}
	}
	return nil
}

// grantRolesIn applies the Roles of file (relative to the repository root) in
// namespace and binds each to the user: the hand-written Roles of config/rbac
// leave their namespace to whoever binds them.
func (cp *ControlPlane) grantRolesIn(ctx context.Context, user, file, namespace string) error {
	objs, err := cp.readObjects(file)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return fmt.Errorf("grant %s to %s: the file holds no roles", file, user)
	}
	for _, role := range objs {
		if role.GetKind() != "Role" {
			return fmt.Errorf("grant %s to %s in %s: the file holds a %s; only Roles are granted in a namespace", file, user, namespace, role.GetKind())
		}
		role.SetNamespace(namespace)
		if err := cp.bindRole(ctx, user, file, role); err != nil {
			return err
		}
	}
	return nil
}

// BindRBAC applies the ClusterRoles and Roles in the YAML files (relative paths
// are taken from the repository root) and binds each to the user: a
// ClusterRoleBinding for a ClusterRole, a RoleBinding in the Role's namespace
// for a Role. Other kinds in the files are refused, so that a file meant to be
// RBAC cannot quietly grant more than it says.
func (cp *ControlPlane) BindRBAC(ctx context.Context, user string, files ...string) error {
	if len(files) == 0 {
		return errors.New("bind RBAC: no files")
	}
	for _, file := range files {
		objs, err := cp.readObjects(file)
		if err != nil {
			return err
		}
		if len(objs) == 0 {
			return fmt.Errorf("bind RBAC to %s: %s holds no roles", user, file)
		}
		for _, obj := range objs {
			if err := cp.bindRole(ctx, user, file, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

func (cp *ControlPlane) bindRole(ctx context.Context, user, file string, role *unstructured.Unstructured) error {
	gvk := role.GroupVersionKind()
	if gvk.Group != rbacv1.GroupName || (gvk.Kind != "ClusterRole" && gvk.Kind != "Role") {
		return fmt.Errorf("bind RBAC to %s: %s holds a %s; only ClusterRoles and Roles are bound", user, file, gvk.Kind)
	}
	if err := cp.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(role), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s from %s: %w", gvk.Kind, role.GetName(), file, err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: gvk.Kind, Name: role.GetName()}
	bindingName := unsafeFileChars.ReplaceAllString(user, "-") + "-" + role.GetName()
	var binding client.Object
	if gvk.Kind == "ClusterRole" {
		binding = &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: bindingName},
			Subjects:   subjects,
			RoleRef:    roleRef,
		}
	} else {
		binding = &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: bindingName, Namespace: role.GetNamespace()},
			Subjects:   subjects,
			RoleRef:    roleRef,
		}
	}
	// Binding the same user to the same role twice is harmless: same name, same content.
	if err := cp.client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s %s to %s: %w", gvk.Kind, role.GetName(), user, err)
	}
	return nil
}

// readObjects decodes every YAML document of file into an object.
func (cp *ControlPlane) readObjects(file string) ([]*unstructured.Unstructured, error) {
	path, err := cp.repoPath(file)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var obj unstructured.Unstructured
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode %s: %w", file, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, &obj)
		}
	}
}

// repoPath resolves a path relative to the repository root; absolute paths are
// returned as they are.
func (cp *ControlPlane) repoPath(p string) (string, error) {
	if filepath.IsAbs(p) {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, p), nil
}
