//go:build !unix

package transport

import "net"

// rawReaderOf is nil where the raw reads of leanread_unix.go are not
// written: reads block holding a pooled buffer.
func rawReaderOf(net.Conn) rawReader { return nil }

func (cr *connReader) fillRaw() error { panic("unreachable: no raw reader") }
