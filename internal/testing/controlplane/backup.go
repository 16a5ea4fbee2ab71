package controlplane

// Backup and restore of etcd's data directory, to simulate what an
// operator does when a cluster is restored from an older backup: the
// apiserver's history goes backwards, and resourceVersions that clients
// stored point into a future the server will never reach (unless the
// restore used etcdutl's --bump-revision --mark-compacted, which turns them
// into 410s). A backup here is a copy of the data directory taken while etcd
// is stopped: crash-consistent, as etcd recovers it from its WAL on start.

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
)

var backupSeq atomic.Int64

// BackupEtcd stops etcd (SIGKILL, as StopEtcd), copies its data directory
// into a new directory under Dir, starts etcd again and returns the copy's
// path, to pass to RestoreEtcd. The apiserver keeps running; its requests
// fail while etcd is down (a second or two). It returns ErrStopped after
// Stop, or the error of the copy or the start.
func (c *ControlPlane) BackupEtcd(ctx context.Context) (string, error) {
	if err := c.StopEtcd(); err != nil {
		return "", err
	}
	dst := c.path(fmt.Sprintf("etcd-backup-%d", backupSeq.Add(1)))
	copyErr := copyDir(c.path("etcd-data"), dst)
	if err := c.StartEtcd(ctx); err != nil {
		return "", err
	}
	if copyErr != nil {
		return "", fmt.Errorf("controlplane: backup etcd: %w", copyErr)
	}
	c.logf("controlplane: etcd backed up to %s", dst)
	return dst, nil
}

// RestoreEtcd restores etcd from a directory returned by BackupEtcd: it
// stops the apiserver and etcd, replaces etcd's data directory with a copy
// of backup (which stays usable for another restore), and starts etcd and
// the apiserver again, returning once the apiserver is ready. etcd's
// revision is then the backup's, plus what the apiserver writes on start.
// It returns ErrStopped after Stop, or the first error of the steps.
func (c *ControlPlane) RestoreEtcd(ctx context.Context, backup string) error {
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	if err := c.StopEtcd(); err != nil {
		return err
	}
	data := c.path("etcd-data")
	if err := os.RemoveAll(data); err != nil {
		return fmt.Errorf("controlplane: restore etcd: %w", err)
	}
	if err := copyDir(backup, data); err != nil {
		return fmt.Errorf("controlplane: restore etcd: %w", err)
	}
	if err := c.StartEtcd(ctx); err != nil {
		return err
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return err
	}
	c.logf("controlplane: etcd restored from %s", backup)
	return nil
}

// copyDir copies the tree under src to dst, which must not exist. dst is
// made private (0700), as etcd wants its data directory; what is inside gets
// the default permissions (etcd only warns about its subdirectories).
func copyDir(src, dst string) error {
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return err
	}
	return os.Chmod(dst, 0o700)
}
