package load

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestZipfFollowsPowerLaw(t *testing.T) {
	const n, draws = 100, 400_000
	z, err := NewZipf(n, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.NewPCG(1, 2)
	var hits [n]int
	for i := 0; i < draws; i++ {
		k := z.Rank(float64(r.Uint64()>>11) * 0x1p-53)
		if k >= n {
			t.Fatalf("rank %d out of [0, %d)", k, n)
		}
		hits[k]++
	}
	// P(rank 0) = 1/zeta(n, theta); the Gray et al. method is exact for ranks 0 and 1.
	for k := 0; k < 2; k++ {
		want := draws / math.Pow(float64(k+1), 0.99) / z.zetan
		if got := float64(hits[k]); math.Abs(got-want) > 0.03*want {
			t.Errorf("rank %d drawn %v times, want about %.0f", k, got, want)
		}
	}
	// The head is hot and falls off: rank 0 beats rank 9 by about 10x, rank 99 is rare.
	if ratio := float64(hits[0]) / float64(hits[9]); ratio < 6 || ratio > 14 {
		t.Errorf("rank 0 / rank 9 = %.1f, want about 10", ratio)
	}
	if hits[n-1] == 0 || hits[n-1] > hits[0]/30 {
		t.Errorf("last rank drawn %d times, rank 0 %d: not a power law", hits[n-1], hits[0])
	}
}

func TestZipfRankBounds(t *testing.T) {
	z, err := NewZipf(10, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if got := z.Rank(0); got != 0 {
		t.Errorf("Rank(0) = %d, want 0", got)
	}
	if got := z.Rank(math.Nextafter(1, 0)); got != 9 {
		t.Errorf("Rank(1-) = %d, want 9", got)
	}
}

func TestNewZipfRejects(t *testing.T) {
	for _, c := range []struct {
		n     uint64
		theta float64
	}{{1, 0.9}, {0, 0.9}, {10, 0}, {10, 1}, {10, 1.5}, {10, math.NaN()}} {
		if _, err := NewZipf(c.n, c.theta); err == nil {
			t.Errorf("NewZipf(%d, %v) accepted", c.n, c.theta)
		}
	}
}

func TestUniformKeysAreEven(t *testing.T) {
	k, err := NewKeys("k", 10, "uniform", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.NewPCG(3, 4)
	var hits [10]int
	for i := 0; i < 100_000; i++ {
		hits[k.Pick(r)]++
	}
	for i, h := range hits {
		if h < 9_500 || h > 10_500 {
			t.Errorf("key %d picked %d times of 100,000, want about 10,000", i, h)
		}
	}
}

func TestZipfKeysPreferTheFirst(t *testing.T) {
	k, err := NewKeys("k", 1000, "zipf", 0.99)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.NewPCG(5, 6)
	var first, rest int
	for i := 0; i < 10_000; i++ {
		if k.Pick(r) == 0 {
			first++
		} else {
			rest++
		}
	}
	// 1/zeta(1000, 0.99) is about 0.13; uniform would give 0.001.
	if first < 1000 || first > 1700 {
		t.Errorf("key 0 picked %d times of 10,000, want about 1,300", first)
	}
}

func TestKeysNamesAndErrors(t *testing.T) {
	k, err := NewKeys("tb:k", 12, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if k.Len() != 12 || string(k.Name(0)) != "tb:k0" || string(k.Name(11)) != "tb:k11" {
		t.Errorf("names: len %d, %q .. %q", k.Len(), k.Name(0), k.Name(11))
	}
	// Names must not share capacity: appending to one must not overwrite the next.
	_ = append(k.Name(0), 'X')
	if string(k.Name(1)) != "tb:k1" {
		t.Errorf("appending to name 0 changed name 1 to %q", k.Name(1))
	}
	one, _ := NewKeys("h", 1, "zipf", 0.99)
	if one.Pick(rand.NewPCG(1, 1)) != 0 {
		t.Error("one key: Pick != 0")
	}
	for _, c := range []struct {
		n    int
		dist string
	}{{0, "uniform"}, {5, "gauss"}} {
		if _, err := NewKeys("k", c.n, c.dist, 0.99); err == nil {
			t.Errorf("NewKeys(%d, %q) accepted", c.n, c.dist)
		}
	}
}
