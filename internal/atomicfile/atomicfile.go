// Package atomicfile writes whole files atomically: a temporary file beside
// the target, renamed into place, so a reader (a script polling for a
// ready file, a reviewer, a crash) never sees one half written.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path with mode 0644, replacing any file there. On
// error nothing is left behind but what was at path before.
func Write(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
