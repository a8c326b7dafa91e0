package main

import "time"

type latencies struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

type connections struct {
	Bound  int   `json:"bound"`
	Used   int   `json:"used"`   // connections open at once at most (one per busy sender)
	Opened int64 `json:"opened"` // connections dialed, reconnects included
}

type cpuResult struct {
	Cgroup          string      `json:"cgroup"`
	CPUCgroup       string      `json:"cpu_cgroup"`
	Version         int         `json:"cgroup_version"`
	Cores           float64     `json:"cores"`
	UsageUs         float64     `json:"usage_us"`
	UsageStartUs    float64     `json:"usage_start_us"`
	UsageEndUs      float64     `json:"usage_end_us"`
	WindowS         float64     `json:"window_s"`
	WindowStartUnix float64     `json:"window_start_unix"`
	WindowEndUnix   float64     `json:"window_end_unix"`
	UsPerRequest    *float64    `json:"us_per_request"`
	NrPeriods       int64       `json:"nr_periods"`
	NrThrottled     int64       `json:"nr_throttled"`
	ThrottledMs     *float64    `json:"throttled_ms"`
	QuotaCores      *float64    `json:"quota_cores"`
	Samples         []perSecond `json:"samples"`
}

type generatorCPU struct {
	CPUS         float64  `json:"cpu_s"`
	UsPerRequest *float64 `json:"us_per_request"`
}

type result struct {
	Target       string       `json:"target"`
	HTTP         string       `json:"http"`
	Arrivals     string       `json:"arrivals"`
	OfferedRPS   float64      `json:"offered_rps"`
	Burst        int          `json:"burst,omitempty"`
	TickMs       float64      `json:"tick_ms,omitempty"`
	ClusterMean  float64      `json:"cluster_mean,omitempty"`
	Seed         *uint64      `json:"seed,omitempty"`
	WarmupS      float64      `json:"warmup_s"`
	DurationS    float64      `json:"duration_s"`
	Scheduled    int64        `json:"scheduled"`
	ScheduledRPS float64      `json:"scheduled_rps"`
	Sent         int64        `json:"sent"`
	Completed    int64        `json:"completed"`
	OK           int64        `json:"ok"`
	Failed       int64        `json:"failed"`
	Non2xx       int64        `json:"non_2xx"`
	Errors       int64        `json:"errors"`
	Unfinished   int64        `json:"unfinished"`
	ErrorSample  string       `json:"error_sample,omitempty"`
	AchievedRPS  float64      `json:"achieved_rps"`
	LatencyMs    latencies    `json:"latency_ms"`
	StartDelayMs latencies    `json:"start_delay_ms"`
	LateStarts   int64        `json:"late_starts"`
	LateStartMs  float64      `json:"late_start_threshold_ms"`
	Connections  connections  `json:"connections"`
	CPU          *cpuResult   `json:"cpu"`
	LimitCores   *float64     `json:"limit_cores,omitempty"`
	Utilization  *float64     `json:"utilization,omitempty"`
	Generator    generatorCPU `json:"generator"`
}

func ms(ns float64) float64 { return round(ns/1e6, 3) }

func quantiles(h *histogram) latencies {
	return latencies{P50: ms(h.quantile(0.50)), P90: ms(h.quantile(0.90)), P99: ms(h.quantile(0.99)), Max: ms(float64(h.max.Load()))}
}

func ptr[T any](v T) *T { return &v }

func buildResult(cfg *config, p *pool, cpu *cpuReader, win *window, scheduled int64) *result {
	dur := cfg.duration.Seconds()
	r := &result{
		Target: cfg.target, HTTP: cfg.httpImpl, Arrivals: cfg.arrivals, OfferedRPS: cfg.rate,
		WarmupS: cfg.warmup.Seconds(), DurationS: dur,
		Scheduled: scheduled, ScheduledRPS: round(float64(scheduled)/dur, 3),
		Sent: p.sent.Load(), Completed: p.completed.Load(), OK: p.ok.Load(),
		Non2xx: p.non2xx.Load(), Errors: p.errs.Load(),
		AchievedRPS:  round(float64(p.answeredInWindow.Load())/dur, 3),
		LatencyMs:    quantiles(&p.latency),
		StartDelayMs: quantiles(&p.startDelay),
		LateStarts:   p.late.Load(), LateStartMs: ms(float64(lateStart)),
	}
	// Scheduled in the window but neither answered nor failed: still waiting for a connection when the
	// run ended (a server slower than the offered rate), or still in flight.
	r.Unfinished = scheduled - r.Completed - r.Errors
	r.Failed = r.Non2xx + r.Errors + r.Unfinished
	if s := p.errSample.Load(); s != nil {
		r.ErrorSample = *s
	}
	if cfg.arrivals == "synchronized" {
		r.Burst = cfg.burst
		r.TickMs = round(float64(cfg.burst)/cfg.rate*1e3, 3)
	}
	if cfg.arrivals == "clustered" {
		r.ClusterMean = cfg.clusterMean
	}
	if cfg.arrivals == "poisson" || cfg.arrivals == "clustered" {
		r.Seed = ptr(cfg.seed)
	}
	p.mu.Lock()
	r.Connections = connections{Bound: cfg.connections, Used: p.workers, Opened: p.dials.Load()}
	p.mu.Unlock()
	answered := float64(p.answeredInWindow.Load())
	genCPU := (win.rusage1 - win.rusage0).Seconds()
	r.Generator.CPUS = round(genCPU, 4)
	if answered > 0 {
		r.Generator.UsPerRequest = ptr(round(genCPU*1e6/answered, 2))
	}
	if cpu != nil {
		window := float64(win.endNs-win.startNs) / 1e9
		usage := float64(win.cpu1.usageNs - win.cpu0.usageNs)
		c := &cpuResult{
			Cgroup: cpu.cgroup, CPUCgroup: cpu.cpuCgroup, Version: cpu.version,
			Cores:           round(usage/1e9/window, 4),
			UsageUs:         round(usage/1e3, 1),
			UsageStartUs:    round(float64(win.cpu0.usageNs)/1e3, 1),
			UsageEndUs:      round(float64(win.cpu1.usageNs)/1e3, 1),
			WindowS:         round(window, 6),
			WindowStartUnix: unix(win.startWall),
			WindowEndUnix:   unix(win.endWall),
			NrPeriods:       win.cpu1.nrPeriods - win.cpu0.nrPeriods,
			NrThrottled:     win.cpu1.nrThrottled - win.cpu0.nrThrottled,
			Samples:         win.samples,
		}
		if answered > 0 {
			c.UsPerRequest = ptr(round(usage/1e3/answered, 2))
		}
		if win.cpu1.hasThrottled {
			c.ThrottledMs = ptr(round(float64(win.cpu1.throttledNs-win.cpu0.throttledNs)/1e6, 3))
		}
		if q := cpu.quotaCores(); q > 0 {
			c.QuotaCores = ptr(round(q, 4))
		}
		r.CPU = c
		if cfg.limitCores > 0 {
			r.LimitCores = ptr(cfg.limitCores)
			r.Utilization = ptr(round(c.Cores/cfg.limitCores, 4))
		}
	}
	return r
}

func unix(t time.Time) float64 { return round(float64(t.UnixNano())/1e9, 6) }
