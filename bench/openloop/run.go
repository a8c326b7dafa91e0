package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// pool hands each arrival to an idle connection, opens a new one when none is idle (up to the bound),
// and past the bound queues the arrival until a connection frees up: that wait counts in its latency.
type pool struct {
	cfg       *config
	start     time.Time
	winStart  int64 // measured window [winStart, winEnd), ns after start, by intended time
	winEnd    int64
	newClient func() requester

	mu       sync.Mutex
	idle     []*worker
	backlog  []int64 // FIFO of intended times waiting for a connection
	head     int
	workers  int
	stopping bool

	outstanding atomic.Int64
	dials       atomic.Int64

	// requests intended inside the window
	sent, completed, ok, non2xx, errs, late atomic.Int64
	latency, startDelay                     histogram
	// responses that arrived inside the window, whenever intended
	answeredInWindow atomic.Int64
	errSample        atomic.Pointer[string]
}

type worker struct {
	p      *pool
	next   chan int64
	client requester
}

func (p *pool) since() int64 { return int64(time.Since(p.start)) }

func (p *pool) dispatch(off int64) {
	p.outstanding.Add(1)
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		var w *worker
		if p.cfg.rotate { // least recently used first: every connection carries its share, as N clients
			w, p.idle = p.idle[0], p.idle[1:]
		} else {
			w, p.idle = p.idle[n-1], p.idle[:n-1]
		}
		p.mu.Unlock()
		w.next <- off
		return
	}
	if p.workers < p.cfg.connections {
		p.workers++
		p.mu.Unlock()
		w := &worker{p: p, next: make(chan int64, 1), client: p.newClient()}
		go w.run(off)
		return
	}
	p.backlog = append(p.backlog, off)
	p.mu.Unlock()
}

func (w *worker) run(off int64) {
	p := w.p
	for {
		w.send(off)
		p.mu.Lock()
		if p.head < len(p.backlog) && !p.stopping {
			off = p.backlog[p.head]
			p.head++
			if p.head == len(p.backlog) {
				p.backlog, p.head = p.backlog[:0], 0
			}
			p.mu.Unlock()
			continue
		}
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		off = <-w.next
	}
}

func (w *worker) send(off int64) {
	p := w.p
	inWindow := off >= p.winStart && off < p.winEnd
	if inWindow {
		p.sent.Add(1)
	}
	started := p.since()
	status, err := w.client.do()
	ended := p.since()
	if err == nil && ended >= p.winStart && ended < p.winEnd {
		p.answeredInWindow.Add(1)
	}
	if inWindow {
		delay := started - off
		p.startDelay.record(delay)
		if delay > int64(lateStart) {
			p.late.Add(1)
		}
		if err != nil {
			p.errs.Add(1)
			if p.errSample.Load() == nil {
				msg := err.Error()
				p.errSample.CompareAndSwap(nil, &msg)
			}
		} else {
			p.completed.Add(1)
			p.latency.record(ended - off)
			if status >= 200 && status < 300 {
				p.ok.Add(1)
			} else {
				p.non2xx.Add(1)
			}
		}
	}
	p.outstanding.Add(-1)
}

// stop discards the arrivals still waiting for a connection (they count as unfinished); requests
// already sent finish by their deadline.
func (p *pool) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = true
	p.outstanding.Add(-int64(len(p.backlog) - p.head))
	p.backlog, p.head = nil, 0
}

type window struct {
	startWall, endWall time.Time
	startNs, endNs     int64
	cpu0, cpu1         cpuSample
	samples            []perSecond
	rusage0, rusage1   time.Duration
	err                error
}

type perSecond struct {
	T           float64 `json:"t_s"`
	Cores       float64 `json:"cores"`
	NrPeriods   int64   `json:"nr_periods"`
	NrThrottled int64   `json:"nr_throttled"`
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure samples the cgroup (if any) and this process's CPU at the window's start, every second, and
// at its end.
func measure(p *pool, cpu *cpuReader) *window {
	w := &window{}
	sleepUntil := func(off int64) {
		if d := off - p.since(); d > 0 {
			time.Sleep(time.Duration(d))
		}
	}
	read := func() (cpuSample, int64, time.Time) {
		var s cpuSample
		if cpu != nil {
			var err error
			if s, err = cpu.read(); err != nil && w.err == nil {
				w.err = err
			}
		}
		return s, p.since(), time.Now()
	}
	sleepUntil(p.winStart)
	w.rusage0 = selfCPU()
	w.cpu0, w.startNs, w.startWall = read()
	prev, prevNs := w.cpu0, w.startNs
	for k := int64(1); ; k++ {
		at := p.winStart + k*int64(time.Second)
		if at > p.winEnd {
			at = p.winEnd
		}
		sleepUntil(at)
		s, now, wall := read()
		if cpu != nil {
			w.samples = append(w.samples, perSecond{
				T:           round(float64(now-w.startNs)/1e9, 3),
				Cores:       round(float64(s.usageNs-prev.usageNs)/float64(now-prevNs), 4),
				NrPeriods:   s.nrPeriods - prev.nrPeriods,
				NrThrottled: s.nrThrottled - prev.nrThrottled,
			})
		}
		prev, prevNs = s, now
		if at == p.winEnd {
			w.rusage1 = selfCPU()
			w.cpu1, w.endNs, w.endWall = s, now, wall
			return w
		}
	}
}

func run(cfg *config, cpu *cpuReader) (*result, error) {
	lead := int64(scheduleLead)
	p := &pool{cfg: cfg, winStart: lead + int64(cfg.warmup)}
	p.winEnd = p.winStart + int64(cfg.duration)
	switch cfg.httpImpl {
	case "raw":
		request := requestBytes(cfg)
		p.newClient = func() requester {
			return &rawConn{addr: cfg.addr, request: request, timeout: cfg.timeout, dials: func() { p.dials.Add(1) }}
		}
	case "nethttp":
		transport := newTransport(cfg, func() { p.dials.Add(1) })
		p.newClient = func() requester { return newStdClient(cfg, transport) }
	}
	var dump *bufio.Writer
	if cfg.dumpIntended != "" {
		f, err := os.Create(cfg.dumpIntended)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		dump = bufio.NewWriterSize(f, 1<<20)
	}
	sched := newSchedule(cfg, lead, p.winEnd)
	if cfg.rotate { // all the connections from the start, used in turn
		for i := 0; i < cfg.connections; i++ {
			w := &worker{p: p, next: make(chan int64, 1), client: p.newClient()}
			p.idle = append(p.idle, w)
			go func() { w.run(<-w.next) }()
		}
		p.workers = cfg.connections
	}

	p.start = time.Now()
	measured := make(chan *window, 1)
	go func() { measured <- measure(p, cpu) }()
	var scheduled int64
	func() {
		sleeper := newPreciseSleeper()
		defer runtime.UnlockOSThread()
		buf := make([]byte, 0, 24)
		for {
			off, more := sched.next()
			if !more {
				return
			}
			if off >= p.winStart {
				scheduled++
			}
			if dump != nil {
				dump.Write(append(strconv.AppendInt(buf[:0], off, 10), '\n'))
			}
			sleeper.until(off, p.since)
			p.dispatch(off)
		}
	}()
	if dump != nil {
		if err := dump.Flush(); err != nil {
			return nil, fmt.Errorf("--dump-intended: %w", err)
		}
	}
	win := <-measured
	if win.err != nil {
		return nil, win.err
	}
	// Drain: queued arrivals may still get a connection for one timeout, then sent ones finish by theirs.
	waitIdle := func(limit time.Duration) {
		deadline := time.Now().Add(limit)
		for p.outstanding.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitIdle(cfg.timeout)
	p.stop()
	waitIdle(cfg.timeout + time.Second)
	return buildResult(cfg, p, cpu, win, scheduled), nil
}

func round(v float64, digits int) float64 {
	scale := math.Pow(10, float64(digits))
	return math.Round(v*scale) / scale
}
