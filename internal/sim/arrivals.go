package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// arrivals draws a tenant's arrival times. Its rate is a function of time,
// piecewise constant or linear (a ramp) between breakpoints (start, stop,
// the on/off edges, the bursts' edges); the next arrival comes when the
// integral of the rate since the last one reaches a target: 1 for evenly
// spaced arrivals, a draw of Exp(1) for a Poisson process (the
// time-rescaling construction of a non-homogeneous Poisson process).
// Times are seconds since the start of the run, as float64.
type arrivals struct {
	t       *Tenant
	poisson bool
	rng     *rand.Rand
	now     float64 // the last arrival
	start   float64
	stop    float64
}

func newArrivals(t *Tenant, rng *rand.Rand) *arrivals {
	return &arrivals{t: t, poisson: t.Arrivals == "poisson", rng: rng, now: secs(t.Start.D()), start: secs(t.Start.D()), stop: secs(t.Stop.D())}
}

func secs(d time.Duration) float64 { return d.Seconds() }

// next returns the time of the next arrival, or false when there is none
// before the tenant stops.
func (a *arrivals) next() (float64, bool) {
	need := 1.0
	if a.poisson {
		need = a.rng.ExpFloat64()
	}
	t := a.now
	for t < a.stop {
		r0, slope, end := a.piece(t)
		if end <= t {
			// A breakpoint that rounding put at t: step past it.
			t = math.Nextafter(t, math.Inf(1))
			continue
		}
		span := end - t
		area := r0*span + slope*span*span/2
		if area >= need {
			var dx float64
			switch {
			case slope == 0:
				dx = need / r0
			default:
				// r0*x + slope*x²/2 = need; the root where the rate is positive.
				dx = (-r0 + math.Sqrt(max(0, r0*r0+2*slope*need))) / slope
			}
			t += min(max(dx, 0), span)
			if t >= a.stop {
				break
			}
			a.now = t
			return t, true
		}
		need -= area
		t = end
	}
	a.now = a.stop
	return 0, false
}

// piece describes the rate from t to the next breakpoint end: the rate
// at t and its slope (per second). A repeating burst (Every) counts as
// its repetition at or after t.
func (a *arrivals) piece(t float64) (r0, slope, end float64) {
	tn := a.t
	end = a.stop
	for _, b := range tn.Bursts {
		at, until := secs(b.At.D()), secs(b.At.D()+b.Duration.D())
		if every := secs(b.Every.D()); every > 0 && t >= at {
			// The repetition at or after t's: the one that started last,
			// or the next if t is past its end.
			k := math.Floor((t - at) / every)
			if t >= at+k*every+(until-at) {
				k++
			}
			at, until = at+k*every, until+k*every
		}
		if t >= at && t < until {
			return b.Rate, 0, min(until, end)
		}
		if at > t {
			end = min(end, at)
		}
	}
	if tn.On > 0 {
		on, off := secs(tn.On.D()), secs(tn.Off.D())
		cycle := on + off
		k := math.Floor((t - a.start) / cycle)
		phase := t - a.start - k*cycle
		if phase >= on {
			return 0, 0, min(end, a.start+(k+1)*cycle)
		}
		end = min(end, a.start+k*cycle+on)
	}
	r0, slope = tn.Rate, 0
	if tn.RampTo != nil && a.stop > a.start {
		slope = (*tn.RampTo - tn.Rate) / (a.stop - a.start)
		r0 = tn.Rate + slope*(t-a.start)
	}
	return r0, slope, end
}
