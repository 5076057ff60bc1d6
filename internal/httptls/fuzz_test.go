package httptls

import (
	"fmt"
	"testing"
)

// FuzzTransports holds the cache to its guarantees under any sequence of
// materials: never more than its bound; the same material, asked twice in a
// row, gets the same transport (connections are reused); two materials that
// differ never share one (a rotated CA is never verified with the old one).
func FuzzTransports(f *testing.F) {
	f.Add(uint8(2), []byte{0, 1, 2, 0, 0, 3})
	f.Add(uint8(1), []byte{5, 5, 4})
	f.Fuzz(func(t *testing.T, bound uint8, seq []byte) {
		limit := int(bound%8) + 1
		tr := NewTransports(limit)
		owner := map[any]string{}
		for _, b := range seq {
			// Materials differ in one field or another, as rotations do.
			m := &Material{ServerName: fmt.Sprintf("s%d", b%16), InsecureSkipVerify: b&16 != 0}
			id := fmt.Sprintf("%s/%v", m.ServerName, m.InsecureSkipVerify)
			first, err := tr.Transport(m)
			if err != nil {
				t.Fatal(err)
			}
			again, err := tr.Transport(&Material{ServerName: m.ServerName, InsecureSkipVerify: m.InsecureSkipVerify})
			if err != nil {
				t.Fatal(err)
			}
			if first != again {
				t.Fatalf("material %s got two transports in a row", id)
			}
			if prev, ok := owner[first]; ok && prev != id {
				t.Fatalf("materials %s and %s share a transport", prev, id)
			}
			owner[first] = id
			if n := tr.Len(); n > limit {
				t.Fatalf("%d transports kept, bound %d", n, limit)
			}
		}
	})
}
