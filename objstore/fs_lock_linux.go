package objstore

import (
	"os"

	"golang.org/x/sys/unix"
)

func ofdLock(f *os.File, offset int64) error {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: offset, Len: 1}
	for {
		err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLKW, &lk)
		if err == unix.EINTR {
			continue
		}
		return err
	}
}

func ofdUnlock(f *os.File, offset int64) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: offset, Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}
