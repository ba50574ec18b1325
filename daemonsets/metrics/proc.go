package metrics

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// proc is one process as /proc shows it.
type proc struct {
	ppid        int
	cpuTicks    uint64 // utime + stime + cutime + cstime
	rssPages    int64
	sizePages   int64 // the address space (statm's size)
	read, write int64 // -1 when /proc/<pid>/io is not readable
	container   string
}

// procTable is every process of the machine at one moment, with the
// container (CONTAINER_ID) of those that have one in their environment,
// indexed once for all the containers a scrape measures.
type procTable struct {
	procs    map[int]*proc
	children map[int][]int    // ppid → pids
	roots    map[string][]int // container → pids whose environment names it
	pageSize int64
}

// readProcTable reads root (/proc). Processes that end while it reads, or
// whose files it may not read, are left out.
func readProcTable(root string) *procTable {
	t := &procTable{procs: map[int]*proc{}, children: map[int][]int{}, roots: map[string][]int{}, pageSize: int64(os.Getpagesize())}
	entries, err := os.ReadDir(root)
	if err != nil {
		return t
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(root, e.Name())
		p, ok := readProc(dir)
		if !ok {
			continue
		}
		t.procs[pid] = p
		t.children[p.ppid] = append(t.children[p.ppid], pid)
		if p.container != "" {
			t.roots[p.container] = append(t.roots[p.container], pid)
		}
	}
	return t
}

func readProc(dir string) (*proc, bool) {
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return nil, false
	}
	p := &proc{read: -1, write: -1}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is state (field 3); utime..cstime are fields 14-17.
	if len(f) < 15 || f[0] == "Z" {
		return nil, false
	}
	p.ppid, _ = strconv.Atoi(f[1])
	for _, k := range f[11:15] {
		n, _ := strconv.ParseUint(k, 10, 64)
		p.cpuTicks += n
	}
	if statm, err := os.ReadFile(filepath.Join(dir, "statm")); err == nil {
		if g := strings.Fields(string(statm)); len(g) > 1 {
			p.sizePages, _ = strconv.ParseInt(g[0], 10, 64)
			p.rssPages, _ = strconv.ParseInt(g[1], 10, 64)
		}
	}
	if env, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("CONTAINER_ID=")); ok {
				p.container = string(v)
				break
			}
		}
	}
	if io, err := os.ReadFile(filepath.Join(dir, "io")); err == nil {
		for _, line := range strings.Split(string(io), "\n") {
			k, v, ok := strings.Cut(line, ": ")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				continue
			}
			switch k {
			case "read_bytes":
				p.read = n
			case "write_bytes":
				p.write = n
			}
		}
	}
	return p, true
}

// usage sums the processes of container id: those whose environment names
// it and their descendants (a process that cleared its environment is still
// the container's). ok is false when none runs.
func (t *procTable) usage(id string) (Usage, bool) {
	in := map[int]bool{}
	queue := slices.Clone(t.roots[id])
	for _, pid := range queue {
		in[pid] = true
	}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range t.children[pid] {
			if !in[c] {
				in[c] = true
				queue = append(queue, c)
			}
		}
	}
	if len(in) == 0 {
		return Usage{}, false
	}
	u := Usage{CacheBytes: -1, Source: "proc", Processes: len(in)}
	var ticks uint64
	ioKnown := true
	for pid := range in {
		p := t.procs[pid]
		// A process's reaped children are in its cutime and cstime, so
		// each CPU second is counted once: by the process itself while it
		// lives, by the parent that waited for it after.
		ticks += p.cpuTicks
		u.RSSBytes += p.rssPages * t.pageSize
		u.VirtualBytes += p.sizePages * t.pageSize
		if p.read < 0 {
			ioKnown = false
		}
		u.ReadBytes += p.read
		u.WriteBytes += p.write
	}
	u.CPUSeconds = float64(ticks) / clockTicks
	if !ioKnown {
		u.ReadBytes, u.WriteBytes = -1, -1
	}
	return u, true
}
