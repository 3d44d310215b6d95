package trainer

import "golang.org/x/sys/unix"

// exchangeDirs atomically swaps the directories a and b (renameat2 with
// RENAME_EXCHANGE): at every instant each name holds a complete directory.
func exchangeDirs(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
