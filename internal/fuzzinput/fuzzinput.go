// Package fuzzinput turns a fuzzer's bytes into decisions for test generators,
// so that every planner's fuzz test reads its input the same way.
package fuzzinput

// Bytes hands out decisions from the fuzz input. Once the input is used up
// every decision is 0, which generators map to the common case.
type Bytes struct {
	data []byte
	pos  int
}

// New reads decisions from data.
func New(data []byte) *Bytes { return &Bytes{data: data} }

// Next is the next byte, or 0 once the input is used up.
func (b *Bytes) Next() byte {
	if b.pos >= len(b.data) {
		return 0
	}
	v := b.data[b.pos]
	b.pos++
	return v
}

// Intn is a decision among n.
func (b *Bytes) Intn(n int) int { return int(b.Next()) % n }

// Rare is true for one byte value in n, never for the exhausted input.
func (b *Bytes) Rare(n int) bool { return b.Intn(n) == n-1 }

// Empty reports whether the input is used up.
func (b *Bytes) Empty() bool { return b.pos >= len(b.data) }
