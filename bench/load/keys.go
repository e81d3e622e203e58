package load

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
)

// Zipf draws ranks 0..n-1 with P(rank i) proportional to 1/(i+1)^theta, using the
// method of Gray et al. ("Quickly generating billion-record synthetic databases") that
// YCSB uses, so theta may be below 1 (YCSB's default is 0.99). Rank 0 is the hottest.
type Zipf struct {
	n                        uint64
	theta, alpha, zetan, eta float64
	half                     float64 // 1 + 0.5^theta
}

// NewZipf returns a Zipf over n ranks. Setting it up costs O(n).
func NewZipf(n uint64, theta float64) (*Zipf, error) {
	if n < 2 {
		return nil, fmt.Errorf("zipf needs at least 2 keys, got %d", n)
	}
	if !(theta > 0 && theta < 1) {
		return nil, fmt.Errorf("zipf theta %v is not in (0, 1)", theta)
	}
	zetan := 0.0
	for i := uint64(1); i <= n; i++ {
		zetan += 1 / math.Pow(float64(i), theta)
	}
	zeta2 := 1 + math.Pow(0.5, theta)
	return &Zipf{
		n: n, theta: theta, zetan: zetan,
		alpha: 1 / (1 - theta),
		eta:   (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/zetan),
		half:  zeta2,
	}, nil
}

// Rank maps u, uniform in [0, 1), to a rank.
func (z *Zipf) Rank(u float64) uint64 {
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.half {
		return 1
	}
	r := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if r >= z.n {
		r = z.n - 1
	}
	return r
}

// Keys is a fixed set of key names and how to pick among them.
type Keys struct {
	names [][]byte
	zipf  *Zipf // nil: uniform
}

// NewKeys makes n keys named prefix0 .. prefix(n-1), picked by dist: "uniform" or
// "zipf" with the given theta.
func NewKeys(prefix string, n int, dist string, theta float64) (*Keys, error) {
	if n < 1 {
		return nil, fmt.Errorf("key count %d is below 1", n)
	}
	k := &Keys{names: names(prefix, 0, n)}
	switch dist {
	case "uniform", "":
	case "zipf":
		if n > 1 {
			z, err := NewZipf(uint64(n), theta)
			if err != nil {
				return nil, err
			}
			k.zipf = z
		}
	default:
		return nil, fmt.Errorf("key distribution %q is not uniform or zipf", dist)
	}
	return k, nil
}

// names returns prefix+i for i in [from, from+n), sharing one backing array.
func names(prefix string, from, n int) [][]byte {
	size := 0
	for i := from; i < from+n; i++ {
		size += len(prefix) + len(strconv.Itoa(i))
	}
	buf := make([]byte, 0, size)
	out := make([][]byte, n)
	for i := range out {
		start := len(buf)
		buf = append(buf, prefix...)
		buf = strconv.AppendInt(buf, int64(from+i), 10)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}

// Len returns the number of keys.
func (k *Keys) Len() int { return len(k.names) }

// Name returns key i.
func (k *Keys) Name(i int) []byte { return k.names[i] }

// Pick returns a key index drawn with r.
func (k *Keys) Pick(r *rand.PCG) int {
	if len(k.names) == 1 {
		return 0
	}
	if k.zipf != nil {
		return int(k.zipf.Rank(float64(r.Uint64()>>11) * 0x1p-53))
	}
	return int(bounded(r.Uint64(), uint64(len(k.names))))
}

// bounded maps x uniformly onto [0, n) (Lemire's multiply-shift).
func bounded(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}
