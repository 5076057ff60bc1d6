/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import "testing"

func TestNamespacePrefix(t *testing.T) {
	tests := map[string]string{
		"TestRollout":             "testrollout-",
		"TestRollout/three_zones": "testrollout-three-zones-",
		"[It] rolls out / zone A": "it-rolls-out-zone-a-",
		"///":                     "test-",
		"TestAVeryLongNameThatGoesOnAndOnAndOnForever": "testaverylongnamethatgoesonandonandonfor-",
	}
	for name, want := range tests {
		if got := namespacePrefix(name); got != want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", name, got, want)
		}
	}
}
