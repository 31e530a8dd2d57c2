package agent

import (
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression of an artifact, as the API names it.
type Compression string

const (
	None Compression = "None"
	Gzip Compression = "Gzip"
	Zstd Compression = "Zstd"
)

// ParseCompression reads a compression's name, in any case; empty is None.
// Its error wraps ErrInvalid.
func ParseCompression(s string) (Compression, error) {
	for _, c := range []Compression{None, Gzip, Zstd} {
		if strings.EqualFold(s, string(c)) {
			return c, nil
		}
	}
	if s == "" {
		return None, nil
	}
	return "", fmt.Errorf("%w: compression %q: want None, Gzip or Zstd", ErrInvalid, s)
}

// The settings favour speed: a backup should take about as long as the
// snapshot itself. etcd's database compresses well at the fastest levels
// (much of it is free pages and repeated keys).
const (
	gzipLevel = gzip.BestSpeed
	zstdLevel = zstd.SpeedFastest
)

// compressor returns a writer that compresses into w. Closing it flushes
// the end of the stream into w, and does not close w.
func (c Compression) compressor(w io.Writer) (io.WriteCloser, error) {
	switch c {
	case None:
		return nopWriteCloser{w}, nil
	case Gzip:
		return gzip.NewWriterLevel(w, gzipLevel)
	case Zstd:
		// The frame's checksum lets the reader catch damage that the
		// artifact's SHA-256, when unknown, would not.
		// One goroutine: the stream arrives in 32 KiB messages, far slower
		// than one core compresses them, and the cores are better left to
		// etcd and the hashes.
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstdLevel), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	}
	return nil, fmt.Errorf("%w: compression %q", ErrInvalid, c)
}

// decompressor returns a reader of what r holds, decompressed. It checks
// the format's own checksums (gzip's CRC-32, zstd's frame checksum) and
// fails on data that ends early.
func (c Compression) decompressor(r io.Reader) (io.ReadCloser, error) {
	switch c {
	case None:
		return io.NopCloser(r), nil
	case Gzip:
		return gzip.NewReader(r)
	case Zstd:
		d, err := zstd.NewReader(r, zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, err
		}
		return zstdReadCloser{d}, nil
	}
	return nil, fmt.Errorf("%w: compression %q", ErrInvalid, c)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

type zstdReadCloser struct{ *zstd.Decoder }

func (z zstdReadCloser) Close() error {
	z.Decoder.Close()
	return nil
}
