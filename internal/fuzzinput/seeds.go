package fuzzinput

import "math/rand/v2"

// Corpus is what seeds are added to: a *testing.F.
type Corpus interface{ Add(args ...any) }

// AddRandomSeeds adds n random seeds of minLen to minLen+extra-1 bytes,
// drawn from a fixed PCG(seed1, seed2) so that every run checks the same
// inputs.
func AddRandomSeeds(f Corpus, seed1, seed2 uint64, n, minLen, extra int) {
	rng := rand.New(rand.NewPCG(seed1, seed2))
	for range n {
		seed := make([]byte, minLen+rng.IntN(extra))
		for i := range seed {
			seed[i] = byte(rng.UintN(256))
		}
		f.Add(seed)
	}
}
