/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package grafanacompat

import "testing"

func TestHolds(t *testing.T) {
	for _, tc := range []struct {
		name       string
		have, want any
		holds      bool
	}{
		{"equal scalars", "a", "a", true},
		{"numbers of two Go types", int64(2), float64(2), true},
		{"a changed scalar", int64(2), int64(3), false},
		{"a field the API server defaulted", map[string]any{"a": "x", "b": "default"}, map[string]any{"a": "x"}, true},
		{"a field missing", map[string]any{"b": "default"}, map[string]any{"a": "x"}, false},
		{"an empty map wanted, none stored", nil, map[string]any{}, true},
		{"a list item more", []any{"a", "b"}, []any{"a"}, false},
		{"a list item less", []any{"a"}, []any{"a", "b"}, false},
		{"list items holding defaults", []any{map[string]any{"name": "a", "d": int64(1)}}, []any{map[string]any{"name": "a"}}, true},
		{"a list in another order", []any{"b", "a"}, []any{"a", "b"}, false},
		{"null wanted, a value stored", "x", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holds(tc.have, tc.want); got != tc.holds {
				t.Errorf("holds(%v, %v) = %v, want %v", tc.have, tc.want, got, tc.holds)
			}
		})
	}
}
