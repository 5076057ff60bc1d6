package httptls

import (
	"fmt"
	"testing"
	"time"
)

// FuzzTransports holds the cache to its guarantees under any sequence of
// materials and pauses: the same material, asked twice in a row, gets the
// same transport (connections are reused); two materials that differ never
// share one (a rotated CA is never verified with the old one); a transport
// used within the idle time is kept, and none idle for longer is.
func FuzzTransports(f *testing.F) {
	f.Add([]byte{0, 1, 2, 0, 0, 3})
	f.Add([]byte{5, 5, 4, 0x80, 0xc0, 5})
	f.Fuzz(func(t *testing.T, seq []byte) {
		const idle = 10 * time.Second
		now := time.Unix(0, 0)
		tr := NewTransports(idle)
		tr.SetClock(func() time.Time { return now })
		owner := map[any]string{}
		lastUsed := map[string]time.Time{}
		for _, b := range seq {
			// The high bits pause between calls, up to past the idle time.
			now = now.Add(time.Duration(b>>6) * idle / 2)
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
			lastUsed[id] = now
			inUse := 0
			for _, at := range lastUsed {
				if now.Sub(at) <= idle {
					inUse++
				}
			}
			if n := tr.Len(); n != inUse {
				t.Fatalf("%d transports kept, want the %d used within the idle time", n, inUse)
			}
		}
	})
}
