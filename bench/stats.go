package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// dist summarises a sample of durations. Quantiles are nearest-rank: p99 of 200 samples
// is the second-largest one, so a p99 needs a hundred samples before it means anything
// (the report states n beside every quantile).
type dist struct {
	N    int           `json:"n"`
	Min  time.Duration `json:"min"`
	P50  time.Duration `json:"p50"`
	P95  time.Duration `json:"p95"`
	P99  time.Duration `json:"p99"`
	Max  time.Duration `json:"max"`
	Mean time.Duration `json:"mean"`
}

func summarize(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return dist{
		N: len(s), Min: s[0], Max: s[len(s)-1], Mean: sum / time.Duration(len(s)),
		P50: quantile(s, 0.50), P95: quantile(s, 0.95), P99: quantile(s, 0.99),
	}
}

// quantile returns the nearest-rank q-quantile of sorted s.
func quantile(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(float64(len(s))*q+0.999999) - 1 // ceil(n·q) − 1
	return s[min(max(i, 0), len(s)-1)]
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// kib formats a byte count in KiB with one decimal.
func kib(n float64) string { return strconv.FormatFloat(n/1024, 'f', 1, 64) + " KiB" }

// mib formats a byte count in MiB with one decimal.
func mib(n float64) string { return strconv.FormatFloat(n/(1<<20), 'f', 1, 64) + " MiB" }

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, which Linux fixes
// at 100 for every user-visible interface on the architectures Go supports.
const userHZ = 100

// procStat is what the bench reads of /proc/<pid>/stat.
type procStat struct {
	PID  int
	PPID int
	Comm string
	CPU  time.Duration // utime + stime
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// pid (comm) state ppid … utime(14) stime(15); comm may hold spaces and
	// parentheses, so split after the last ')'.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, errors.New("unparsable stat")
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return procStat{}, errors.New("short stat")
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return procStat{PID: pid, PPID: ppid, Comm: string(b[open+1 : end]), CPU: time.Duration(ut+st) * time.Second / userHZ}, nil
}

// descendantStats returns the stat of every live process below pid.
func descendantStats(pid int) ([]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	all := map[int]procStat{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, err := readProcStat(p); err == nil {
			all[p] = s
		}
	}
	var out []procStat
	for p, s := range all {
		for q := s.PPID; q > 1; q = all[q].PPID {
			if q == pid {
				out = append(out, all[p])
				break
			}
			if _, ok := all[q]; !ok {
				break
			}
		}
	}
	return out, nil
}

// chromiumCPU sums the CPU time of the Chromium processes below this process (the
// browser, its zygotes, renderers, GPU and utility processes) and counts them.
func chromiumCPU() (time.Duration, int, error) {
	ps, err := descendantStats(os.Getpid())
	if err != nil {
		return 0, 0, err
	}
	var sum time.Duration
	n := 0
	for _, p := range ps {
		if strings.HasPrefix(p.Comm, "chrom") {
			sum += p.CPU
			n++
		}
	}
	if n == 0 {
		return 0, 0, errors.New("no chromium process below this one")
	}
	return sum, n, nil
}

// selfCPU is this process's own CPU time (user + system).
func selfCPU() (time.Duration, error) {
	s, err := readProcStat(os.Getpid())
	return s.CPU, err
}

// vmRSS reads VmRSS of this process, in bytes.
func vmRSS() (int64, error) { return vmRSSOf("self") }

// vmRSSOf reads VmRSS of process pid ("self" for this one), in bytes.
func vmRSSOf(pid string) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", pid, "status")) //nolint:gosec // a /proc file of a process of the bench
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%s/status", pid)
}

// quantileInterval bounds the q-quantile of the distribution that ds are a sample of,
// with 95 % confidence: the order statistics at the ranks n·q ∓ 1.96·√(n·q·(1−q)) (the
// normal approximation of the binomial count of samples below the quantile). With
// 600 samples the p99's bounds are about the 11th and the 2nd largest.
func quantileInterval(ds []time.Duration, q float64) (low, high time.Duration) {
	n := len(ds)
	if n == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	nq := float64(n) * q
	half := 1.96 * math.Sqrt(nq*(1-q))
	lo := int(math.Floor(nq-half)) - 1 // ranks are 1-based
	hi := int(math.Ceil(nq+half)) - 1
	return s[max(0, min(lo, n-1))], s[max(0, min(hi, n-1))]
}
