package controllers

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/echelon-operator/echelon/controllers/internal/controllertest"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// Every object of config/samples is accepted by the API server with the
// generated CRDs and their validation rules (dry run), so the samples the docs
// point at cannot drift from the API.
func TestSamplesAreAccepted(t *testing.T) {
	cp := controllertest.APIServer(t)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	ns, err := cp.CreateNamespace(t.Context(), "samples")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("%s: %v", file, err)
			}
			if len(obj.Object) == 0 || obj.GetKind() == "Namespace" {
				continue
			}
			obj.SetNamespace(ns)
			if err := cp.Client().Create(t.Context(), obj, client.DryRunAll); err != nil {
				t.Errorf("%s: %s %s refused: %v", filepath.Base(file), obj.GetKind(), obj.GetName(), err)
			}
		}
	}
}

func TestMain(m *testing.M) { controllertest.Main(m) }
