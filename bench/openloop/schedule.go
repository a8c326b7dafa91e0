package main

import (
	"math/rand/v2"
	"runtime"
	"syscall"
)

// schedule yields intended send times (ns after the run's start) in order, computed from the arrival
// model alone: never from when earlier requests were sent or answered.
type schedule struct {
	arrivals string
	rate     float64
	burst    int
	mean     float64 // clustered: mean requests per cluster
	left     int     // clustered: arrivals left in the current cluster
	lead     int64
	end      int64 // arrivals stop before this offset
	rng      *rand.Rand
	k        int64   // arrivals produced so far
	t        float64 // poisson, clustered: seconds since lead of the last arrival (clustered: of the last cluster)
}

func newSchedule(c *config, lead, end int64) *schedule {
	return &schedule{arrivals: c.arrivals, rate: c.rate, burst: c.burst, mean: c.clusterMean, lead: lead, end: end,
		rng: rand.New(rand.NewPCG(c.seed, 0x6f70656e6c6f6f70))}
}

func (s *schedule) next() (int64, bool) {
	var at float64 // seconds after lead
	switch s.arrivals {
	case "poisson": // exponential gaps: the superposition of many independent clients
		s.t += s.rng.ExpFloat64() / s.rate
		at = s.t
	case "uniform":
		at = float64(s.k) / s.rate
	case "synchronized": // `burst` requests on each tick, a tick every burst/rate seconds
		tick := s.k / int64(s.burst)
		at = float64(tick*int64(s.burst)) / s.rate
	case "clustered": // cluster starts Poisson at rate/mean; each cluster's requests at the same instant
		if s.left == 0 {
			s.t += s.rng.ExpFloat64() * s.mean / s.rate
			s.left = 1 // geometric size: one more with probability 1 - 1/mean, so the mean size is `mean`
			for s.rng.Float64() < 1-1/s.mean {
				s.left++
			}
		}
		s.left--
		at = s.t
	}
	off := s.lead + int64(at*1e9)
	if off >= s.end {
		return 0, false
	}
	s.k++
	return off, true
}

// preciseSleeper sleeps with nanosleep on a locked thread with 1 ns timer slack: the Go runtime's timers
// round sleeps shorter than a millisecond up to about a millisecond on Linux, which would make nearly
// every request of a 1000/s schedule start late.
type preciseSleeper struct{}

const prSetTimerslack = 29

func newPreciseSleeper() preciseSleeper {
	runtime.LockOSThread() // for the calling goroutine's lifetime: the slack is per thread
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	return preciseSleeper{}
}

// until sleeps until `since()` reaches off (ns), retrying after signals.
func (preciseSleeper) until(off int64, since func() int64) {
	for {
		left := off - since()
		if left <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(left)
		syscall.Nanosleep(&ts, nil)
	}
}
