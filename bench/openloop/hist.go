package main

import (
	"math/bits"
	"sync/atomic"
)

// histogram counts durations (ns) in log-linear buckets: 128 per power of two, under 0.8% relative
// error, with atomic adds so every connection records into one histogram without a lock.
const subBits = 7

type histogram struct {
	counts [64 << subBits]atomic.Uint64
	n      atomic.Uint64
	max    atomic.Int64
}

func bucket(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - subBits
	return (shift+1)<<subBits + int(v>>shift) - 1<<subBits
}

// bucketMid is the middle of a bucket's range.
func bucketMid(i int) float64 {
	if i < 1<<subBits {
		return float64(i)
	}
	shift := i>>subBits - 1
	low := uint64(i&(1<<subBits-1)+1<<subBits) << shift
	return float64(low) + float64(uint64(1)<<shift)/2
}

func (h *histogram) record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucket(uint64(v))].Add(1)
	h.n.Add(1)
	for {
		old := h.max.Load()
		if v <= old || h.max.CompareAndSwap(old, v) {
			return
		}
	}
}

// quantile is the value at rank ceil(q*n), in ns; the max is exact.
func (h *histogram) quantile(q float64) float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(q * float64(n))
	if float64(rank) < q*float64(n) {
		rank++
	}
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(bucketMid(i), float64(h.max.Load()))
		}
	}
	return float64(h.max.Load())
}
