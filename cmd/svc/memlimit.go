package main

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the container's memory limit the Go runtime's soft limit is
// set to: the rest is for what the runtime does not count (the executable's pages, the kernel's
// socket buffers, cgo).
const memoryLimitShare = 0.9

// applyMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) to 90% of the memory
// limit of the process's cgroup, when it has one and GOMEMLIMIT is not set. Without a limit
// the collector lets the heap grow to twice its live size before it collects, so a runner
// whose live memory passes half its container's limit is killed for memory it would have
// freed; with one, it collects more often as the heap nears the limit.
func applyMemoryLimit(log *slog.Logger) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok && v != "" {
		return // the operator's own (the runtime read it at start); "off" included
	}
	limit, where, err := cgroupMemoryLimit(os.DirFS("/"))
	if err != nil {
		log.Warn("memory limit: the cgroup's could not be read, so the Go runtime has none", "err", err)
		return
	}
	if limit <= 0 {
		return
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	log.Info("memory limit", "cgroup_limit_bytes", limit, "from", where, "gomemlimit_bytes", soft)
}

// streamsGCPercent is the collector's target (GOGC) of the processes that hold chat streams,
// `svc runner` and `svc dev`, unless GOGC is set. At Go's default of 100 the heap grows by as much
// as the live heap, the stacks and the globals before the next collection: a runner whose
// memory is its open streams (a goroutine stack and a few KiB of turn each) then sits at up to
// twice it. At 50, 2,000 streams waiting on their model took 25-30 KiB each against 28-35,
// and 2,000 streaming 35-43 against 41-46, at the same CPU per turn (BENCHMARKS.md, issue 29).
// Not for the roles that build (`svc up`, `svc worker`): a bundle's build, which allocates a lot
// on a small heap, took 1.8 times as long at 50 (about 10 ms more for support-desk); `svc dev` loads
// its one agent once.
const streamsGCPercent = 50

// applyGCPercent sets the collector's target to streamsGCPercent unless GOGC is set.
func applyGCPercent(log *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		return // the operator's own (the runtime read it at start); "off" included
	}
	debug.SetGCPercent(streamsGCPercent)
	log.Debug("collector target", "gogc", streamsGCPercent)
}

// noLimit is where a cgroup v1 limit means none (the kernel writes about 2^63, page-aligned).
const noLimit = 1 << 62

// cgroupMemoryLimit is the memory limit of the process's cgroup read from root (the file system
// root), the smallest along its path up to the hierarchy's root, and the file it came from; 0
// when there is none. cgroup v2 (memory.max) is read where the unified hierarchy is mounted at
// /sys/fs/cgroup, else cgroup v1 (memory/memory.limit_in_bytes). Inside a container the
// process's path may name the host's hierarchy, which the container does not see: then the
// mount's own root, the container's cgroup, is read.
func cgroupMemoryLimit(root fs.FS) (int64, string, error) {
	b, err := fs.ReadFile(root, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil // not Linux, or no cgroups
	}
	if err != nil {
		return 0, "", err
	}
	var v2, v1 string // the cgroup paths, which start with "/"; "" when absent
	for line := range strings.Lines(string(b)) {
		// hierarchy-ID:controller-list:cgroup-path
		id, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2 = p
		case slices.Contains(strings.Split(controllers, ","), "memory"):
			v1 = p
		}
	}
	if v2 != "" {
		if _, err := fs.Stat(root, "sys/fs/cgroup/cgroup.controllers"); err == nil {
			return smallestLimit(root, "sys/fs/cgroup", v2, "memory.max")
		}
	}
	if v1 != "" {
		return smallestLimit(root, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
	}
	return 0, "", nil
}

// smallestLimit reads file in the cgroup at mount+cgroup and each of its parents, and returns
// the smallest limit found; when the cgroup's directory is not there (the host's path, seen
// from a container), the mount's root alone.
func smallestLimit(root fs.FS, mount, cgroup, file string) (int64, string, error) {
	dir := path.Join(mount, path.Clean("/" + cgroup)[1:])
	if _, err := fs.Stat(root, dir); err != nil {
		dir = mount
	}
	var best int64
	where := ""
	for {
		n, ok, err := readLimit(root, path.Join(dir, file))
		if err != nil {
			return 0, "", err
		}
		if ok && (best == 0 || n < best) {
			best, where = n, "/"+path.Join(dir, file)
		}
		if dir == mount {
			return best, where, nil
		}
		dir = path.Dir(dir)
	}
}

// readLimit reads one limit file: ok false for "max", a v1 value meaning none, or no file.
func readLimit(root fs.FS, name string) (int64, bool, error) {
	b, err := fs.ReadFile(root, name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, errors.New("/" + name + ": not a number of bytes: " + strconv.Quote(s))
	}
	if n <= 0 || n >= noLimit {
		return 0, false, nil
	}
	return n, true, nil
}
