package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuReader reads a cgroup's CPU usage and CFS throttling counters straight from its files.
type cpuReader struct {
	version   int
	cgroup    string // v1: the cpuacct folder; v2: the folder
	cpuCgroup string // v1: the cpu folder (cpu.stat, quota); v2: same as cgroup
}

type cpuSample struct {
	usageNs      int64
	nrPeriods    int64
	nrThrottled  int64
	throttledNs  int64
	hasThrottled bool
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func openCgroup(path, cpuPath string) (*cpuReader, error) {
	path = filepath.Clean(path)
	r := &cpuReader{cgroup: path}
	switch {
	case exists(filepath.Join(path, "cpuacct.usage")):
		r.version = 1
		if cpuPath == "" {
			cpuPath = deriveV1CPU(path)
			if cpuPath == "" {
				return nil, fail("--cgroup %s: no cpu controller folder with cpu.stat found beside it; give it with --cpu-cgroup", path)
			}
		}
		if !exists(filepath.Join(cpuPath, "cpu.stat")) {
			return nil, fail("--cpu-cgroup %s has no cpu.stat", cpuPath)
		}
		r.cpuCgroup = filepath.Clean(cpuPath)
	case exists(filepath.Join(path, "cpu.stat")):
		r.version = 2
		if cpuPath != "" {
			return nil, fail("--cpu-cgroup is for cgroup v1; %s is a v2 cgroup", path)
		}
		r.cpuCgroup = path
	default:
		return nil, fail("--cgroup %s has neither cpuacct.usage (v1) nor cpu.stat (v2)", path)
	}
	if _, err := r.read(); err != nil {
		return nil, err
	}
	return r, nil
}

// deriveV1CPU finds the cpu controller's folder for a cpuacct folder: the same folder when the two
// controllers share a mount, else the path with its "cpuacct" mount component replaced by "cpu".
func deriveV1CPU(cpuacct string) string {
	if exists(filepath.Join(cpuacct, "cpu.stat")) {
		return cpuacct
	}
	parts := strings.Split(cpuacct, string(filepath.Separator))
	for i, part := range parts {
		if part != "cpuacct" {
			continue
		}
		for _, name := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
			candidate := append(append(append([]string{}, parts[:i]...), name), parts[i+1:]...)
			path := strings.Join(candidate, string(filepath.Separator))
			if exists(filepath.Join(path, "cpu.stat")) {
				return path
			}
		}
	}
	return ""
}

func readStat(path string) (map[string]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	values := map[string]int64{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		key, value, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64); err == nil {
			values[string(key)] = n
		}
	}
	return values, nil
}

func (r *cpuReader) read() (cpuSample, error) {
	var s cpuSample
	stat, err := readStat(filepath.Join(r.cpuCgroup, "cpu.stat"))
	if err != nil {
		return s, fmt.Errorf("reading cgroup: %w", err)
	}
	s.nrPeriods, s.nrThrottled = stat["nr_periods"], stat["nr_throttled"]
	if r.version == 1 {
		data, err := os.ReadFile(filepath.Join(r.cgroup, "cpuacct.usage"))
		if err != nil {
			return s, fmt.Errorf("reading cgroup: %w", err)
		}
		if s.usageNs, err = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err != nil {
			return s, fmt.Errorf("%s/cpuacct.usage: %q is not a number", r.cgroup, data)
		}
		s.throttledNs, s.hasThrottled = stat["throttled_time"], true
		return s, nil
	}
	usage, ok := stat["usage_usec"]
	if !ok {
		return s, fmt.Errorf("%s/cpu.stat has no usage_usec", r.cgroup)
	}
	s.usageNs = usage * 1000
	throttled, ok := stat["throttled_usec"]
	s.throttledNs, s.hasThrottled = throttled*1000, ok
	return s, nil
}

// quotaCores is the CFS quota in cores, or 0 when there is none (or it cannot be read).
func (r *cpuReader) quotaCores() float64 {
	if r.version == 1 {
		quota, err1 := readInt(filepath.Join(r.cpuCgroup, "cpu.cfs_quota_us"))
		period, err2 := readInt(filepath.Join(r.cpuCgroup, "cpu.cfs_period_us"))
		if err1 != nil || err2 != nil || quota <= 0 || period <= 0 {
			return 0
		}
		return float64(quota) / float64(period)
	}
	data, err := os.ReadFile(filepath.Join(r.cgroup, "cpu.max"))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 || fields[0] == "max" {
		return 0
	}
	quota, err1 := strconv.ParseInt(fields[0], 10, 64)
	period, err2 := strconv.ParseInt(fields[1], 10, 64)
	if err1 != nil || err2 != nil || period <= 0 {
		return 0
	}
	return float64(quota) / float64(period)
}

func readInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
}
