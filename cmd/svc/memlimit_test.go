package main

import (
	"log/slog"
	"runtime/debug"
	"testing"
	"testing/fstest"
)

func TestCgroupMemoryLimit(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, c := range []struct {
		name  string
		fs    fstest.MapFS
		limit int64
		where string
		err   bool
	}{
		{name: "no cgroups", fs: fstest.MapFS{}},
		{name: "v2 in a container, its own root", fs: fstest.MapFS{
			"proc/self/cgroup":                 file("0::/\n"),
			"sys/fs/cgroup/cgroup.controllers": file("cpu memory pids\n"),
			"sys/fs/cgroup/memory.max":         file("3221225472\n"),
		}, limit: 3 << 30, where: "/sys/fs/cgroup/memory.max"},
		{name: "v2 without a limit", fs: fstest.MapFS{
			"proc/self/cgroup":                 file("0::/\n"),
			"sys/fs/cgroup/cgroup.controllers": file("memory\n"),
			"sys/fs/cgroup/memory.max":         file("max\n"),
		}},
		{name: "v2, the parent's limit smaller", fs: fstest.MapFS{
			"proc/self/cgroup":                           file("0::/kubepods/pod1/ctr\n"),
			"sys/fs/cgroup/cgroup.controllers":           file("memory\n"),
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": file("max\n"),
			"sys/fs/cgroup/kubepods/pod1/memory.max":     file("1073741824\n"),
			"sys/fs/cgroup/kubepods/memory.max":          file("8589934592\n"),
		}, limit: 1 << 30, where: "/sys/fs/cgroup/kubepods/pod1/memory.max"},
		{name: "v1, the host's path not visible", fs: fstest.MapFS{
			"proc/self/cgroup":                           file("12:pids:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("536870912\n"),
		}, limit: 512 << 20, where: "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{name: "v1 without a limit", fs: fstest.MapFS{
			"proc/self/cgroup": file("4:memory:/process_api/b49e\n0::/\n"),
			"sys/fs/cgroup/memory/process_api/b49e/memory.limit_in_bytes": file("9223372036854771712\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  file("9223372036854771712\n"),
		}},
		{name: "v1 with memory among other controllers", fs: fstest.MapFS{
			"proc/self/cgroup": file("3:cpu,memory:/app\n"),
			"sys/fs/cgroup/memory/app/memory.limit_in_bytes": file("2147483648\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":     file("9223372036854771712\n"),
		}, limit: 2 << 30, where: "/sys/fs/cgroup/memory/app/memory.limit_in_bytes"},
		{name: "a limit that is not a number", fs: fstest.MapFS{
			"proc/self/cgroup":                 file("0::/\n"),
			"sys/fs/cgroup/cgroup.controllers": file("memory\n"),
			"sys/fs/cgroup/memory.max":         file("lots\n"),
		}, err: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			limit, where, err := cgroupMemoryLimit(c.fs)
			if (err != nil) != c.err {
				t.Fatalf("err %v, want an error: %v", err, c.err)
			}
			if limit != c.limit || where != c.where {
				t.Errorf("limit %d from %q, want %d from %q", limit, where, c.limit, c.where)
			}
		})
	}
}

// Unless GOGC is set, the processes that hold streams collect at streamsGCPercent; set, it
// stays the operator's.
func TestApplyGCPercent(t *testing.T) {
	old := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	log := slog.New(slog.DiscardHandler)
	t.Setenv("GOGC", "80")
	applyGCPercent(log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC=80 set: the target became %d, want it left alone", got)
	}
	t.Setenv("GOGC", "")
	applyGCPercent(log)
	if got := debug.SetGCPercent(100); got != streamsGCPercent {
		t.Errorf("with GOGC unset: target %d, want %d", got, streamsGCPercent)
	}
}
