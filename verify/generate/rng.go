package generate

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// rng is a PCG stream with derivations written here rather than taken from
// math/rand/v2's helpers, so the bytes a seed produces never change with the
// Go release.
type rng struct{ pcg *rand.PCG }

func newRNG(seed int64, stream uint64) *rng {
	return &rng{pcg: rand.NewPCG(uint64(seed), stream^0x9e3779b97f4a7c15)}
}

func (r *rng) uint64() uint64 { return r.pcg.Uint64() }

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.pcg.Uint64()>>11) * 0x1p-53 }

// intn returns a uniform value in [0, n); n must be positive.
func (r *rng) intn(n int) int {
	// Lemire's multiply-shift; the tiny bias for huge n does not matter here
	// and keeping it branch-free keeps the derivation obvious.
	hi, _ := bits.Mul64(r.pcg.Uint64(), uint64(n))
	return int(hi)
}

// chance reports true with probability p.
func (r *rng) chance(p float64) bool { return p > 0 && r.float() < p }

// exp returns an exponentially distributed value with the given mean.
func (r *rng) exp(mean float64) float64 { return -math.Log(1-r.float()) * mean }

// norm returns a normally distributed value (Box–Muller, one of the pair).
func (r *rng) norm(mean, sd float64) float64 {
	u1 := 1 - r.float() // (0, 1]
	u2 := r.float()
	return mean + sd*math.Sqrt(-2*math.Log(u1))*math.Cos(2*math.Pi*u2)
}

// between returns a uniform value in [lo, hi).
func (r *rng) between(lo, hi float64) float64 { return lo + (hi-lo)*r.float() }

// uuid returns a random (version 4, RFC 9562 variant) UUID in canonical
// form, its random bits XORed with mask.
func (r *rng) uuid(mask [2]uint64) string {
	var b [16]byte
	a, c := r.pcg.Uint64()^mask[0], r.pcg.Uint64()^mask[1]
	for i := 0; i < 8; i++ {
		b[i] = byte(a >> (8 * i))
		b[8+i] = byte(c >> (8 * i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hexd = "0123456789abcdef"
	var s [36]byte
	j := 0
	for i, x := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s[j] = '-'
			j++
		}
		s[j], s[j+1] = hexd[x>>4], hexd[x&0x0f]
		j += 2
	}
	return string(s[:])
}
