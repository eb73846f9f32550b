package wire

import (
	"errors"
	"io"
	"sync"
)

// scratch holds the buffers ReadAll reads into; one that grew past maxScratch is left
// to the collector.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

const maxScratch = 1 << 20

// ReadAll is io.ReadAll for the messages of the view path (a sealed frame is some tens
// of kilobytes): it reads into a pooled buffer and returns a copy of exactly the bytes
// read, where io.ReadAll, growing from 512 bytes, allocates about three times the
// message. The caller bounds r (io.LimitReader, a WebSocket read limit).
func ReadAll(r io.Reader) ([]byte, error) {
	bp := scratch.Get().(*[]byte)
	b := (*bp)[:0]
	defer func() {
		if cap(b) <= maxScratch {
			*bp = b[:0]
			scratch.Put(bp)
		}
	}()
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			out := make([]byte, len(b))
			copy(out, b)
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
