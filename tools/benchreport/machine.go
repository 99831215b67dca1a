package benchreport

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// ReadMachine describes this machine from /proc and /etc/os-release
// (Linux); what it cannot read stays empty. goVersion is the toolchain
// that built the benchmarks.
func ReadMachine(goVersion string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: goVersion}
	if goVersion == "" {
		m.Go = runtime.Version()
	}
	eachLine("/proc/cpuinfo", func(k, v string) bool {
		if k == "model name" {
			m.CPU = v
			return false
		}
		return true
	})
	eachLine("/proc/meminfo", func(k, v string) bool {
		if k == "MemTotal" {
			if kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64); err == nil {
				m.MemBytes = kb << 10
			}
			return false
		}
		return true
	})
	eachLine("/etc/os-release", func(k, v string) bool {
		if k == "PRETTY_NAME" {
			m.OS = strings.Trim(v, `"`)
			return false
		}
		return true
	})
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		k := "Linux " + strings.TrimSpace(string(b))
		if m.OS == "" {
			m.OS = k
		} else {
			m.OS += ", " + k
		}
	}
	return m
}

// eachLine calls fn with the key and value of every "key: value" or
// "key=value" line of path until fn returns false.
func eachLine(path string, fn func(k, v string) bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		k, v, ok := strings.Cut(line, ":")
		if eq := strings.IndexByte(line, '='); eq >= 0 && (!ok || eq < len(k)) {
			k, v, ok = line[:eq], line[eq+1:], true
		}
		if ok && !fn(strings.TrimSpace(k), strings.TrimSpace(v)) {
			return
		}
	}
}
