package httptls_test

// Objects against a real API server (etcd and kube-apiserver), as an
// operator bound to the generated ClusterRole and to
// config/rbac/analysis_secrets_role.yaml: the requests each read costs are
// counted at the client's transport.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// apiServer is etcd and kube-apiserver, started once per test binary by the
// first test that needs it.
var apiServer = controlplane.Shared{Options: controlplane.Options{APIServerOnly: true}}

// requests counts the requests for Secrets and ConfigMaps a client makes:
// gets (of one object), lists and watches.
type requests struct {
	mu                 sync.Mutex
	gets, lists, watch int
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		// /api/v1/namespaces/<ns>/<resource>[/<name>]
		if len(parts) >= 5 && (parts[4] == "secrets" || parts[4] == "configmaps") && req.Method == http.MethodGet {
			r.mu.Lock()
			switch {
			case req.URL.Query().Get("watch") == "true":
				r.watch++
			case len(parts) == 6:
				r.gets++
			default:
				r.lists++
			}
			r.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// total is every request counted, and the gets among them.
func (r *requests) total() (all, gets int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets + r.lists + r.watch, r.gets
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// objectsEnv is one test's namespace, an operator's counted live reader and
// Objects, and an admin client.
type objectsEnv struct {
	ns, user string
	admin    client.Client
	counted  *requests
	live     client.Reader
	objects  *httptls.Objects
	// grant binds a Role with rules to the operator in ns.
	grant func(rules ...rbacv1.PolicyRule)
}

// newObjectsEnv starts an Objects as an operator granted what grant gives in
// a fresh namespace (nothing until called).
func newObjectsEnv(t *testing.T) *objectsEnv {
	t.Helper()
	cp := apiServer.Get(t)
	cp.DumpLogsOnFailure(t, 30)
	ctx := t.Context()
	ns := cp.NewNamespace(t)
	user, err := cp.NewOperatorUser(ctx, "echelon-tls-"+ns)
	if err != nil {
		t.Fatal(err)
	}
	counted := &requests{}
	cfg := rest.CopyConfig(user.Config)
	cfg.Wrap(counted.wrap)
	live, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objects := httptls.NewObjects(clientset, live, 0)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- objects.Start(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	admin := cp.Client()
	return &objectsEnv{ns: ns, user: user.Name, admin: admin, counted: counted, live: live, objects: objects,
		grant: func(rules ...rbacv1.PolicyRule) {
			t.Helper()
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls-objects"}, Rules: rules}
			binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls-objects"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user.Name}}}
			for _, obj := range []client.Object{role, binding} {
				if err := admin.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

// grantAnalysisSecrets binds config/rbac/analysis_secrets_role.yaml (get)
// in e's namespace, as an installer does, and list and watch on Secrets and
// ConfigMaps there, which the docs ask an installer to add (confined with
// resourceNames; TestObjectsUnderNarrowGrants shows that works) to have tls
// objects watched.
func (e *objectsEnv) grantAnalysisSecrets(t *testing.T) {
	t.Helper()
	if err := apiServer.Get(t).GrantAnalysisSecrets(t.Context(), e.user, e.ns); err != nil {
		t.Fatal(err)
	}
	e.grant(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"list", "watch"}})
}

// call loads spec in e's namespace through reader and calls url with it.
func (e *objectsEnv) call(t *testing.T, reader client.Reader, transports *httptls.Transports, spec *v1alpha1.TLSConfig, url string) error {
	t.Helper()
	return callIn(t, reader, e.ns, transports, spec, url)
}

// eventually retries f every 10 ms for up to 5 s, and returns how long it
// took to succeed.
func eventually(t *testing.T, what string, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < 5*time.Second {
		if err = f(); err == nil {
			return time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: still failing after 5 s: %v", what, err)
	return 0
}

// A block called again and again costs the API server one GET per call
// when read live, and nothing once its objects are watched (a GET, a LIST
// and a WATCH for the first call); a rotated Secret is used as soon as its
// watch event arrives, with no request.
func TestObjectsCountAndRotation(t *testing.T) {
	e := newObjectsEnv(t)
	e.grantAnalysisSecrets(t)
	oldCA, newCA := newCA(t, "ca-2025"), newCA(t, "ca-2026")
	srv := newServer(t, serverPair(t, oldCA, "127.0.0.1"), nil)
	if err := e.admin.Create(t.Context(), httptlstest.CASecret(e.ns, "ca", oldCA.PEM)); err != nil {
		t.Fatal(err)
	}
	spec := &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "ca"}}
	transports := httptls.NewTransports(0)
	const calls = 100

	for range calls {
		checkErr(t, e.call(t, e.live, transports, spec, srv.URL), "")
	}
	liveAll, liveGets := e.counted.total()
	t.Logf("%d calls read live: %d requests (%d GETs)", calls, liveAll, liveGets)
	if liveGets != calls {
		t.Fatalf("%d calls read live made %d GETs, want one each", calls, liveGets)
	}

	*e.counted = requests{}
	checkErr(t, e.call(t, e.objects, transports, spec, srv.URL), "")
	// The watch syncs in the background; until then reads are live.
	synced := eventually(t, "the watch of the CA Secret syncs", func() error {
		before, _ := e.counted.total()
		if err := e.call(t, e.objects, transports, spec, srv.URL); err != nil {
			return err
		}
		if after, _ := e.counted.total(); after != before {
			return errUnsynced
		}
		return nil
	})
	warm, warmGets := e.counted.total()
	for range calls {
		checkErr(t, e.call(t, e.objects, transports, spec, srv.URL), "")
	}
	all, _ := e.counted.total()
	t.Logf("%d calls through Objects: %d requests to warm up (%d GETs, synced in %v), then %d for %d calls", calls, warm, warmGets, synced, all-warm, calls)
	if all != warm {
		t.Fatalf("%d calls through a synced watch made %d requests, want none", calls, all-warm)
	}
	if warm > 5 {
		t.Errorf("%d requests to warm up the watch of one Secret, want a GET, a LIST, a WATCH and the GETs made before it synced", warm)
	}

	// The server rotates first: the cached old CA no longer verifies it.
	if err := srv.Serve(serverPair(t, newCA, "127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	checkErr(t, e.call(t, e.objects, transports, spec, srv.URL), "certificate signed by unknown authority")
	// Then the Secret: a call trusts the new CA as soon as the watch has the
	// event, without a request.
	secret := &corev1.Secret{}
	if err := e.admin.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: "ca"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["ca.crt"] = newCA.PEM
	if err := e.admin.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	lag := eventually(t, "a call after the rotation trusts the new CA", func() error {
		return e.call(t, e.objects, transports, spec, srv.URL)
	})
	t.Logf("the rotated CA was used %v after the write", lag)
	if lag > time.Second {
		t.Errorf("the rotated CA was used %v after the write, want within a second", lag)
	}
	if after, _ := e.counted.total(); after != all {
		t.Errorf("the rotation cost %d requests, want none: the watch brings it", after-all)
	}
}

var errUnsynced = errors.New("the call read live")

// The operator's grants decide how objects are read, never whether: a Role
// confined to some Secrets by resourceNames still lets each be watched (RBAC
// authorizes a list and a watch narrowed to one name as a get of it); a
// Role granting get alone, as before the watches, reads live at every call,
// with no error.
func TestObjectsUnderNarrowGrants(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rule         rbacv1.PolicyRule
		wantWatching bool
	}{
		{name: "list and watch confined by resourceNames", wantWatching: true,
			rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"ca"}, Verbs: []string{"get", "list", "watch"}}},
		{name: "get only", rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newObjectsEnv(t)
			e.grant(tc.rule)
			ca := newCA(t, "ca")
			srv := newServer(t, serverPair(t, ca, "127.0.0.1"), nil)
			if err := e.admin.Create(t.Context(), httptlstest.CASecret(e.ns, "ca", ca.PEM)); err != nil {
				t.Fatal(err)
			}
			spec := &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "ca"}}
			transports := httptls.NewTransports(0)
			checkErr(t, e.call(t, e.objects, transports, spec, srv.URL), "")
			// Long enough for a watch to sync, or to be refused.
			time.Sleep(time.Second)
			before, _ := e.counted.total()
			for range 10 {
				checkErr(t, e.call(t, e.objects, transports, spec, srv.URL), "")
			}
			after, gets := e.counted.total()
			switch {
			case tc.wantWatching && after != before:
				t.Errorf("10 calls made %d requests (%d GETs in all), want none: served by the watch", after-before, gets)
			case !tc.wantWatching && after-before != 10:
				t.Errorf("10 calls made %d requests, want a GET each and no list or watch tried again", after-before)
			}
		})
	}
}

// A missing Secret is missing from the watch too, with the live read's
// error, and a call made once it exists uses it: the watch brings the
// creation as it brings a rotation.
func TestObjectsMissingThenCreated(t *testing.T) {
	e := newObjectsEnv(t)
	e.grantAnalysisSecrets(t)
	ca := newCA(t, "ca")
	srv := newServer(t, serverPair(t, ca, "127.0.0.1"), nil)
	spec := &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "late"}}
	transports := httptls.NewTransports(0)
	want := field + ".caSecretRef: Secret late not found in namespace " + e.ns
	checkErr(t, e.call(t, e.objects, transports, spec, srv.URL), want)
	eventually(t, "the missing Secret is read from the watch", func() error {
		before, _ := e.counted.total()
		checkErr(t, e.call(t, e.objects, transports, spec, srv.URL), want)
		if after, _ := e.counted.total(); after != before {
			return errUnsynced
		}
		return nil
	})
	if err := e.admin.Create(t.Context(), httptlstest.CASecret(e.ns, "late", ca.PEM)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a call once the Secret exists", func() error { return e.call(t, e.objects, transports, spec, srv.URL) })
}

// An object not read for the idle time stops being watched: a block edited
// away costs nothing for long.
func TestObjectsExpireUnread(t *testing.T) {
	e := newObjectsEnv(t)
	e.grantAnalysisSecrets(t)
	now := time.Now()
	e.objects.SetClock(func() time.Time { return now })
	for _, name := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Data: map[string]string{"ca.crt": "x"}}
		if err := e.admin.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) {
		t.Helper()
		if err := e.objects.Get(t.Context(), client.ObjectKey{Namespace: e.ns, Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Fatal(err)
		}
	}
	read("a")
	read("b")
	if n := e.objects.Watched(); n != 2 {
		t.Fatalf("%d objects watched after reading two, want 2", n)
	}
	now = now.Add(httptls.DefaultIdle * 2 / 3)
	read("a")
	now = now.Add(httptls.DefaultIdle * 2 / 3)
	e.objects.Expire()
	if n := e.objects.Watched(); n != 1 {
		t.Fatalf("%d objects watched, want 1: b unread for longer than %v", n, httptls.DefaultIdle)
	}
}
