/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// schemaNode is the part of JSON Schema values.schema.json uses.
type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	Type                 any                    `json:"type"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties any                    `json:"additionalProperties"`
	Items                *schemaNode            `json:"items"`
	Definitions          map[string]*schemaNode `json:"definitions"`
}

// schemaDefinitions maps each definition of values.schema.json that describes
// a Kubernetes type to that type. Values of these types are passed to the pod
// as they are, so their schema must know every field of the type: a field
// Kubernetes adds must be added here too, or users could not set it.
var schemaDefinitions = map[string]reflect.Type{
	"podSecurityContext":       reflect.TypeFor[corev1.PodSecurityContext](),
	"securityContext":          reflect.TypeFor[corev1.SecurityContext](),
	"toleration":               reflect.TypeFor[corev1.Toleration](),
	"topologySpreadConstraint": reflect.TypeFor[corev1.TopologySpreadConstraint](),
	"affinity":                 reflect.TypeFor[corev1.Affinity](),
	"envVar":                   reflect.TypeFor[corev1.EnvVar](),
	"envFromSource":            reflect.TypeFor[corev1.EnvFromSource](),
	"volumeMount":              reflect.TypeFor[corev1.VolumeMount](),
	"volume":                   reflect.TypeFor[corev1.Volume](),
	"localObjectReference":     reflect.TypeFor[corev1.LocalObjectReference](),
	"resourceClaim":            reflect.TypeFor[corev1.ResourceClaim](),
}

// TestSchemaMatchesKubernetesTypes walks each Kubernetes definition of the
// schema next to its Go type: wherever the schema is closed
// (additionalProperties false), its properties must be exactly the type's JSON
// fields, and every field's JSON type must match. Below the depth the schema
// describes (open objects), the API server validates.
func TestSchemaMatchesKubernetesTypes(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var root schemaNode
	if err := json.Unmarshal(raw, &root); err != nil {
		t.Fatal(err)
	}
	for name, typ := range schemaDefinitions {
		def, ok := root.Definitions[name]
		if !ok {
			t.Errorf("values.schema.json has no definition %q", name)
			continue
		}
		compareSchema(t, root.Definitions, "#/definitions/"+name, def, typ, 0)
	}
	for name := range root.Definitions {
		if _, ok := schemaDefinitions[name]; !ok && !slices.Contains([]string{"labelSelector", "nodeSelectorTerm", "podAffinityTerm"}, name) {
			t.Errorf("definition %q is not checked against a Kubernetes type: add it to schemaDefinitions", name)
		}
	}
	// Every chart value holding a Kubernetes object uses its definition, so
	// nothing is left open.
	for key, def := range map[string]string{
		"podSecurityContext": "podSecurityContext", "securityContext": "securityContext", "affinity": "affinity",
	} {
		if ref := root.Properties[key].Ref; ref != "#/definitions/"+def {
			t.Errorf("values %s: $ref %q, want #/definitions/%s", key, ref, def)
		}
	}
	for key, def := range map[string]string{
		"tolerations": "toleration", "topologySpreadConstraints": "topologySpreadConstraint", "extraEnv": "envVar",
		"envFrom": "envFromSource", "extraVolumes": "volume", "extraVolumeMounts": "volumeMount", "imagePullSecrets": "localObjectReference",
	} {
		if p := root.Properties[key]; p == nil || p.Items == nil || p.Items.Ref != "#/definitions/"+def {
			t.Errorf("values %s: items must be #/definitions/%s", key, def)
		}
	}
}

var (
	quantityType    = reflect.TypeFor[resource.Quantity]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
)

func compareSchema(t *testing.T, defs map[string]*schemaNode, path string, s *schemaNode, typ reflect.Type, depth int) {
	t.Helper()
	if depth > 12 {
		t.Fatalf("%s: schema nests too deep", path)
	}
	if s.Ref != "" {
		name, ok := strings.CutPrefix(s.Ref, "#/definitions/")
		if !ok || defs[name] == nil {
			t.Errorf("%s: $ref %q does not resolve", path, s.Ref)
			return
		}
		s = defs[name]
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := jsonTypes(typ)
	if got := schemaTypes(s.Type); !slices.Equal(got, want) {
		t.Errorf("%s: schema type %v, Go type %s is %v", path, got, typ, want)
		return
	}
	switch {
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() != reflect.Uint8:
		if s.Items == nil {
			t.Errorf("%s: array without items", path)
			return
		}
		compareSchema(t, defs, path+"/items", s.Items, typ.Elem(), depth+1)
	case typ.Kind() == reflect.Struct && typ != quantityType && typ != intOrStringType:
		if s.AdditionalProperties != false {
			return // an open object: the API server validates it
		}
		fields := jsonFields(typ)
		var got []string
		for name := range s.Properties {
			got = append(got, name)
		}
		sort.Strings(got)
		if !slices.Equal(got, slices.Sorted(maps.Keys(fields))) {
			t.Errorf("%s: schema properties\n  %v\nGo type %s has\n  %v", path, got, typ, slices.Sorted(maps.Keys(fields)))
			return
		}
		for name, ft := range fields {
			compareSchema(t, defs, path+"/"+name, s.Properties[name], ft, depth+1)
		}
	}
}

// jsonFields returns the JSON field names of a struct, with embedded inline
// structs flattened (Volume embeds VolumeSource).
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
	return out
}

func jsonTypes(typ reflect.Type) []string {
	switch {
	case typ == quantityType:
		return []string{"number", "string"}
	case typ == intOrStringType:
		return []string{"integer", "string"}
	}
	switch typ.Kind() {
	case reflect.String:
		return []string{"string"}
	case reflect.Bool:
		return []string{"boolean"}
	case reflect.Int, reflect.Int32, reflect.Int64:
		return []string{"integer"}
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			return []string{"string"}
		}
		return []string{"array"}
	case reflect.Struct, reflect.Map:
		return []string{"object"}
	}
	return []string{typ.Kind().String()}
}

func schemaTypes(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = []string{v}
	case []any:
		for _, s := range v {
			out = append(out, s.(string))
		}
	}
	sort.Strings(out)
	return out
}
