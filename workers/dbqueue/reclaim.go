package dbqueue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A claim's worker_id is "<owner>p=<pid>;<run>/<seq>", where owner is
// "i=<instance hash>;h=<host hash>;" (both empty without Config.Instance) and run is random per
// Run. Only the owner and pid are ever parsed: by reclaimPredecessors.

// claimPrefix is the start of the worker_id of every claim this process makes for instance.
func claimPrefix(instance string) string {
	return ownerPrefix(instance) + "p=" + strconv.Itoa(os.Getpid()) + ";"
}

// ownerPrefix names instance on this host; hashed, so that no character of a path needs escaping.
func ownerPrefix(instance string) string {
	return "i=" + shortHash(instance) + ";h=" + shortHash(hostKey()) + ";"
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// hostKey identifies this host and boot: a pid means the same process only on the same boot of
// the same host. The boot id is Linux's; elsewhere the host name alone.
func hostKey() string {
	host, _ := os.Hostname() // a missing name leaves the boot id (or nothing) to tell hosts apart
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return host + "/" + strings.TrimSpace(string(boot))
}

// reclaimPredecessors expires at once the leases of running claims made by an earlier process of
// the same Instance on this host that is gone, so that the claim loop takes them over now (as it
// would after their lease: the attempt counts as lost, see claim). A claim whose process is still
// alive, or another instance's, is left alone.
func (r *run) reclaimPredecessors() {
	ctx, cancel := context.WithTimeout(r.base, dbTimeout)
	defer cancel()
	owner := ownerPrefix(r.q.cfg.Instance)
	var rows []struct {
		ID       string
		WorkerID string
	}
	err := r.q.db.WithContext(ctx).Raw(`SELECT id, worker_id FROM jobs WHERE state = 'running' AND SUBSTR(worker_id, 1, ?) = ?`,
		utf8.RuneCountInString(owner), owner).Scan(&rows).Error
	if err != nil {
		r.q.log.Error("look for the claims of a dead predecessor", "error", err)
		return
	}
	for _, row := range rows {
		pid, ok := claimPID(row.WorkerID, owner)
		if !ok || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		// lease_until just past, so the claim's next look finds it expired; only if it is still
		// the same claim.
		past := r.q.now().Add(-time.Millisecond)
		owned, err := r.update(`UPDATE jobs SET lease_until = ?, updated_at = ? WHERE id = ? AND worker_id = ? AND state = 'running'`,
			past, r.q.now(), row.ID, row.WorkerID)
		if err != nil {
			r.q.log.Error("take back a dead predecessor's claim", "job", row.ID, "error", err)
			continue
		}
		if owned {
			r.q.log.Info("taking back the claim of a dead predecessor of this instance", "job", row.ID, "pid", pid)
		}
	}
}

// claimPID parses the pid out of a worker_id that starts with owner.
func claimPID(workerID, owner string) (int, bool) {
	rest, ok := strings.CutPrefix(workerID, owner+"p=")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, ";")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(num)
	if err != nil {
		return 0, false
	}
	return pid, true
}
