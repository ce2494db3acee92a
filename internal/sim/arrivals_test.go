package sim

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func count(t *testing.T, tn Tenant, run time.Duration) []float64 {
	t.Helper()
	if err := tn.check(Duration(run)); err != nil {
		t.Fatal(err)
	}
	a := newArrivals(&tn, rand.New(rand.NewPCG(1, 2)))
	var out []float64
	for {
		at, ok := a.next()
		if !ok {
			return out
		}
		if len(out) > 0 && at < out[len(out)-1] {
			t.Fatalf("arrival at %g after one at %g", at, out[len(out)-1])
		}
		out = append(out, at)
	}
}

func TestArrivals(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name  string
		t     Tenant
		want  float64 // expected count
		slack float64 // relative
	}{
		{"constant", Tenant{Name: "a", Arrivals: "constant", Rate: 10}, 600, 0.002},
		{"poisson", Tenant{Name: "a", Rate: 10}, 600, 0.1},
		{"ramp", Tenant{Name: "a", Arrivals: "constant", Rate: 0, RampTo: f(20)}, 600, 0.002},
		{"ramp down", Tenant{Name: "a", Arrivals: "constant", Rate: 20, RampTo: f(0)}, 600, 0.002},
		{"on off", Tenant{Name: "a", Arrivals: "constant", Rate: 10, On: Duration(10 * time.Second), Off: Duration(20 * time.Second)}, 200, 0.005},
		{"burst", Tenant{Name: "a", Arrivals: "constant", Rate: 1, Bursts: []Burst{{At: Duration(10 * time.Second), Duration: Duration(5 * time.Second), Rate: 100}}}, 55 + 500, 0.004},
		{"repeating burst", Tenant{Name: "a", Arrivals: "constant", Rate: 1, Bursts: []Burst{{At: Duration(10 * time.Second), Duration: Duration(2 * time.Second), Rate: 50, Every: Duration(20 * time.Second)}}}, 54 + 3*100, 0.004},
		{"window", Tenant{Name: "a", Arrivals: "constant", Rate: 10, Start: Duration(30 * time.Second)}, 300, 0.004},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := float64(len(count(t, tc.t, time.Minute)))
			if math.Abs(got-tc.want) > tc.slack*tc.want+1 {
				t.Fatalf("%g arrivals, want %g", got, tc.want)
			}
		})
	}
	// On/off: nothing in the off periods.
	for _, at := range count(t, Tenant{Name: "a", Rate: 50, On: Duration(10 * time.Second), Off: Duration(20 * time.Second)}, time.Minute) {
		if phase := math.Mod(at, 30); phase >= 10 {
			t.Fatalf("an arrival at %gs, in an off period", at)
		}
	}
	// A repeating burst: at its rate in each repetition, at the tenant's
	// own between them.
	in := 0
	for _, at := range count(t, Tenant{Name: "a", Arrivals: "constant", Rate: 1, Bursts: []Burst{{At: Duration(10 * time.Second), Duration: Duration(2 * time.Second), Rate: 50, Every: Duration(20 * time.Second)}}}, time.Minute) {
		if phase := math.Mod(at-10, 20); at >= 10 && phase < 2 {
			in++
		}
	}
	if in < 299 || in > 301 {
		t.Fatalf("%d arrivals in the bursts, want 300", in)
	}
}
