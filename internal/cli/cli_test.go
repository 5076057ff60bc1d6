package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseTarget(t *testing.T) {
	cases := []struct {
		args     []string
		wantKind kind
		wantName string
		wantErr  string
	}{
		{args: []string{"rg", "ingester"}, wantKind: kindRolloutGroup, wantName: "ingester"},
		{args: []string{"rolloutgroups.echelon.dev/ingester"}, wantKind: kindRolloutGroup, wantName: "ingester"},
		{args: []string{"SP", "zone-b"}, wantKind: kindScalingPolicy, wantName: "zone-b"},
		{args: []string{"dd/zone-a"}, wantKind: kindDelayedDownscale, wantName: "zone-a"},
		{args: []string{"deployment", "x"}, wantErr: `unknown kind "deployment"`},
		{args: []string{"rg"}, wantErr: "no name given"},
		{args: []string{"rg/a", "b"}, wantErr: "not both"},
	}
	for _, tc := range cases {
		k, name, err := parseTarget(tc.args)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.wantErr)
			}
		case err != nil || k != tc.wantKind || name != tc.wantName:
			t.Errorf("%v: got %q %q %v, want %q %q", tc.args, k, name, err, tc.wantKind, tc.wantName)
		}
	}
}

func TestSkew(t *testing.T) {
	for _, tc := range []struct{ plugin, operator, want string }{
		{"v0.3.0", "0.3.0", ""},
		{"v0.3.0-4-gabc1234", "0.3.1", ""},
		{"v0.4.0", "0.3.0", "version skew"},
		{"dev", "0.3.0", "cannot compare"},
	} {
		got := skew(tc.plugin, tc.operator)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("skew(%q, %q) = %q, want %q", tc.plugin, tc.operator, got, tc.want)
		}
	}
}

// A line cut to the terminal's width keeps its colours whole and counts
// only what is visible.
func TestTruncateVisible(t *testing.T) {
	line := "ab\x1b[33mcdef\x1b[0mgh"
	if got := truncateVisible(line, 4); got != "ab\x1b[33mcd"+ansiReset {
		t.Errorf("got %q", got)
	}
	if got := truncateVisible(line, 8); got != line {
		t.Errorf("a line that fits changed: %q", got)
	}
}

// run runs the command with args against the API server at url and returns
// its error and output.
func run(t *testing.T, url string, args ...string) (string, error) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+url+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: demo}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &out}, "v0.3.0")
	cmd.SetArgs(append(args, "--kubeconfig="+kubeconfig, "--cache-dir="+t.TempDir()))
	err := cmd.Execute()
	return out.String(), err
}

// A cluster without Echelon's CRDs (its discovery lists no echelon.dev
// group) gets one line saying so, for every command that reads a group.
func TestNoCRDsIsOneClearLine(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
		case "/apis":
			_, _ = w.Write([]byte(`{"kind":"APIGroupList","groups":[]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		}
	}))
	defer api.Close()
	for _, args := range [][]string{{"get", "rg", "ingester"}, {"pause", "ingester"}, {"plan", "rg", "ingester"}} {
		_, err := run(t, api.URL, args...)
		if err == nil {
			t.Fatalf("%v: no error", args)
		}
		line := OneLine(err)
		t.Logf("%v: error: %s", args, line)
		if !strings.Contains(line, "Echelon's CRDs are not installed") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %q, want one line saying the CRDs are not installed", args, err.Error())
		}
	}
}

// An API server that cannot be reached is named, in one line.
func TestUnreachableIsOneClearLine(t *testing.T) {
	_, err := run(t, "https://127.0.0.1:1", "get", "rg", "ingester")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Kubernetes API server at https://127.0.0.1:1") {
		t.Errorf("got %v", err)
	}
}
