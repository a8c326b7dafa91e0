// Command openloop is an open-loop HTTP/1.1 load generator for a loopback target, independent of Locust.
//
// Arrivals are scheduled in advance on an absolute clock (poisson, uniform, synchronized bursts or
// Poisson clusters) and never wait for responses; latency is measured from each request's intended
// send time, so a slow server does not lower the offered rate or hide its queueing (no coordinated
// omission). It reads a cgroup's CPU counters over the measured window and prints one JSON object.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	maxRate        = 100_000.0
	maxDuration    = 600.0
	maxWarmup      = 60.0
	maxTimeout     = 60.0
	maxConnections = 10_000
	lateStart      = time.Millisecond
	// The schedule starts this long after the program is ready, so the first arrivals are not late.
	scheduleLead = 50 * time.Millisecond
)

type config struct {
	target         string
	addr           string // host:port to dial
	path           string
	host           string
	acceptEncoding string
	rate           float64
	duration       time.Duration
	warmup         time.Duration
	timeout        time.Duration
	arrivals       string
	burst          int
	clusterMean    float64
	connections    int
	rotate         bool
	cgroup         string
	cpuCgroup      string
	limitCores     float64
	httpImpl       string
	seed           uint64
	dumpIntended   string
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func fail(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("openloop", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &config{}
	var rate, duration, warmup, timeout, limit float64
	var seed string
	fs.StringVar(&c.target, "url", "", "target, http://<loopback ip>[:port] (127.0.0.0/8 or [::1]) (required)")
	fs.StringVar(&c.path, "path", "/", "request path")
	fs.StringVar(&c.host, "host", "external.nginx", "Host header")
	fs.StringVar(&c.acceptEncoding, "accept-encoding", "gzip, deflate, br", `Accept-Encoding header ("" sends none)`)
	fs.Float64Var(&rate, "rate", 0, fmt.Sprintf("offered requests per second, <= %g (required)", maxRate))
	fs.Float64Var(&duration, "duration", 0, fmt.Sprintf("measured seconds after the warm-up, <= %g (required)", maxDuration))
	fs.Float64Var(&warmup, "warmup", 2, fmt.Sprintf("seconds of load before the measured window, <= %g", maxWarmup))
	fs.StringVar(&c.arrivals, "arrivals", "", "poisson (exponential gaps), uniform (constant gaps), synchronized (bursts on shared ticks) or clustered (Poisson clusters of --cluster-mean requests at once) (required)")
	fs.IntVar(&c.burst, "burst", 0, "synchronized: requests per tick, the tick being burst/rate (default ceil(rate/20), the sweeps' 20 RPS per paced user)")
	fs.Float64Var(&c.clusterMean, "cluster-mean", 0, "clustered: mean requests per cluster, >= 1; sizes are geometric (1 with probability 1/mean), cluster starts Poisson at rate/mean (required)")
	fs.IntVar(&c.connections, "connections", 64, fmt.Sprintf("keep-alive connection bound, <= %d; past it requests wait for a connection", maxConnections))
	fs.BoolVar(&c.rotate, "rotate", false, "use all --connections in turn, least recently used first (as that many independent clients), instead of reusing the most recent")
	fs.Float64Var(&timeout, "timeout", 5, fmt.Sprintf("seconds a request may take once sent (connect included), <= %g", maxTimeout))
	fs.StringVar(&c.cgroup, "cgroup", "", "cgroup folder to read CPU from: v1 cpuacct (cpuacct.usage) or v2 (cpu.stat)")
	fs.StringVar(&c.cpuCgroup, "cpu-cgroup", "", "cgroup v1: the cpu controller's folder for cpu.stat (default: derived from --cgroup)")
	fs.Float64Var(&limit, "limit-cores", 0, "CPU limit of the cgroup in cores: prints utilization = cores / limit")
	fs.StringVar(&c.httpImpl, "http", "raw", "HTTP client: raw (net.Conn + a minimal HTTP/1.1 reader) or nethttp (net/http Transport)")
	fs.StringVar(&seed, "seed", "", "poisson: random seed (default: from the clock; printed)")
	fs.StringVar(&c.dumpIntended, "dump-intended", "", "debug: write every intended send time (ns after the run's start) to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fmt.Println("usage: openloop --url http://127.0.0.1:PORT --rate RPS --duration S --arrivals poisson|uniform|synchronized|clustered [flags]")
			fs.PrintDefaults()
			return nil, err
		}
		return nil, fail("%v", err)
	}
	if fs.NArg() > 0 {
		return nil, fail("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"url", "rate", "duration", "arrivals"} {
		if !set[name] {
			return nil, fail("--%s is required", name)
		}
	}
	addr, err := loopbackAddr(c.target)
	if err != nil {
		return nil, err
	}
	c.addr = addr
	if !(rate > 0 && rate <= maxRate) { // also rejects NaN
		return nil, fail("--rate %g is out of range: (0, %g] requests per second", rate, maxRate)
	}
	if !(duration > 0 && duration <= maxDuration) {
		return nil, fail("--duration %g is out of range: (0, %g] seconds", duration, maxDuration)
	}
	if !(warmup >= 0 && warmup <= maxWarmup) {
		return nil, fail("--warmup %g is out of range: [0, %g] seconds", warmup, maxWarmup)
	}
	if !(timeout > 0 && timeout <= maxTimeout) {
		return nil, fail("--timeout %g is out of range: (0, %g] seconds", timeout, maxTimeout)
	}
	c.rate = rate
	c.duration = seconds(duration)
	c.warmup = seconds(warmup)
	c.timeout = seconds(timeout)
	switch c.arrivals {
	case "poisson", "uniform", "clustered":
		if set["burst"] {
			return nil, fail("--burst applies to --arrivals synchronized only")
		}
	case "synchronized":
		if !set["burst"] {
			c.burst = int(math.Ceil(rate / 20))
		}
		if c.burst < 1 || float64(c.burst) > maxRate {
			return nil, fail("--burst %d is out of range: [1, %g]", c.burst, maxRate)
		}
	default:
		return nil, fail("--arrivals %q is not one of poisson, uniform, synchronized, clustered", c.arrivals)
	}
	if c.arrivals == "clustered" {
		if !set["cluster-mean"] {
			return nil, fail("--arrivals clustered needs --cluster-mean (mean requests per cluster)")
		}
		if !(c.clusterMean >= 1 && c.clusterMean <= 1000) {
			return nil, fail("--cluster-mean %g is out of range: [1, 1000]", c.clusterMean)
		}
	} else if set["cluster-mean"] {
		return nil, fail("--cluster-mean applies to --arrivals clustered only")
	}
	if c.connections < 1 || c.connections > maxConnections {
		return nil, fail("--connections %d is out of range: [1, %d]", c.connections, maxConnections)
	}
	if c.httpImpl != "raw" && c.httpImpl != "nethttp" {
		return nil, fail("--http %q is not one of raw, nethttp", c.httpImpl)
	}
	if !strings.HasPrefix(c.path, "/") || strings.ContainsAny(c.path, " \r\n") {
		return nil, fail("--path %q must start with / and hold no spaces or line breaks", c.path)
	}
	if c.host == "" || strings.ContainsAny(c.host, " \r\n") || strings.ContainsAny(c.acceptEncoding, "\r\n") {
		return nil, fail("--host must be non-empty, and --host and --accept-encoding must hold no line breaks")
	}
	if set["limit-cores"] {
		if !(limit > 0 && limit <= 1024) {
			return nil, fail("--limit-cores %g is out of range: (0, 1024]", limit)
		}
		if c.cgroup == "" {
			return nil, fail("--limit-cores needs --cgroup (the cgroup whose cores it divides)")
		}
		c.limitCores = limit
	}
	if c.cpuCgroup != "" && c.cgroup == "" {
		return nil, fail("--cpu-cgroup needs --cgroup")
	}
	if seed != "" {
		if c.arrivals != "poisson" && c.arrivals != "clustered" {
			return nil, fail("--seed applies to --arrivals poisson and clustered only")
		}
		if c.seed, err = strconv.ParseUint(seed, 10, 64); err != nil {
			return nil, fail("--seed %q is not an unsigned integer", seed)
		}
	} else {
		c.seed = uint64(time.Now().UnixNano())
	}
	return c, nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// loopbackAddr accepts http://<ip>[:port][/] with a loopback IP (127.0.0.0/8 or ::1) and returns host:port.
func loopbackAddr(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "", fail("--url %q is not a URL like http://127.0.0.1:10080", target)
	}
	if u.Scheme != "http" {
		return "", fail("--url %q: only http:// is supported", target)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
		return "", fail("--url %q: give only scheme, address and port (the path goes in --path)", target)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return "", fail("--url %q: the target must be a loopback IP address (127.0.0.0/8 or [::1]), not %q", target, u.Hostname())
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fail("--url %q: bad port %q", target, port)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "openloop: %v\n", err)
		os.Exit(2)
	}
	var cpu *cpuReader
	if cfg.cgroup != "" {
		if cpu, err = openCgroup(cfg.cgroup, cfg.cpuCgroup); err != nil {
			fmt.Fprintf(os.Stderr, "openloop: %v\n", err)
			os.Exit(2)
		}
	}
	res, err := run(cfg, cpu)
	if err != nil {
		fmt.Fprintf(os.Stderr, "openloop: %v\n", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(res)
	os.Stdout.Write(append(out, '\n'))
}
