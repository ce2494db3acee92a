//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package vfs

import (
	"fmt"
	"io"
	"runtime"
)

// Lock is refused here: without flock, nothing would keep a second
// process out of the file.
func (OS) Lock(name string) (io.Closer, error) {
	return nil, fmt.Errorf("%w: %s: file locks are not implemented on %s", ErrLockUnsupported, name, runtime.GOOS)
}
