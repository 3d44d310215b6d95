package board

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockTable is the file locks held on this machine (/proc/locks), by
// device and inode. It is read, never taken: taking a run's lock to test
// it, even for an instant, could make a trainer starting then fail.
type lockTable struct {
	known bool
	held  map[[3]uint64]bool // major, minor, inode
}

// readLocks reads /proc/locks; known is false where it cannot be read.
func readLocks() lockTable {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return lockTable{}
	}
	defer f.Close()
	t := lockTable{known: true, held: map[[3]uint64]bool{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5317754 0 EOF"; waiters
		// have "->" after the number.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] == "->" || fields[1] != "FLOCK" {
			continue
		}
		parts := strings.Split(fields[5], ":")
		if len(parts) != 3 {
			continue
		}
		maj, err1 := strconv.ParseUint(parts[0], 16, 32)
		mnr, err2 := strconv.ParseUint(parts[1], 16, 32)
		ino, err3 := strconv.ParseUint(parts[2], 10, 64)
		if err1 == nil && err2 == nil && err3 == nil {
			t.held[[3]uint64{maj, mnr, ino}] = true
		}
	}
	return t
}

// heldOn reports whether a lock is held on the file fi describes.
func (t lockTable) heldOn(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !t.known {
		return false
	}
	dev := uint64(st.Dev) //nolint:unconvert // its type differs between architectures
	return t.held[[3]uint64{uint64(unix.Major(dev)), uint64(unix.Minor(dev)), st.Ino}]
}

// networkFS are the file systems whose locks other machines may hold
// unseen by /proc/locks here (statfs f_type).
var networkFS = map[int64]bool{
	0x6969:     true, // NFS
	0xff534d42: true, // CIFS
	0xfe534d42: true, // SMB2
	0x517b:     true, // SMB
	0x0bd00bd0: true, // Lustre
	0x47504653: true, // GPFS
	0x00c36400: true, // Ceph
	0x19830326: true, // BeeGFS
	0x65735546: true, // FUSE (sshfs, s3fs, ...)
	0x013111a8: true, // IBRIX
	0x73757245: true, // Coda
	0x6b414653: true, // AFS
	0x5346414f: true, // OpenAFS
	0x564c:     true, // NCP
	0x01021997: true, // 9P
}

// localLock reports whether the file f is on a local file system, where
// /proc/locks lists every lock held on it: one not listed is released.
func localLock(f *os.File) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return false
	}
	return !networkFS[int64(st.Type)] //nolint:unconvert // its type differs between architectures
}
