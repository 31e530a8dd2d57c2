package agent

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/go-logr/logr"

	"github.com/tend-dev/tend/internal/agentapi"
)

// FetchOptions are what a fetch needs.
type FetchOptions struct {
	// From is the artifact: s3://bucket/key or file:///path.
	From string
	// S3 reaches the store of an s3:// URI.
	S3 S3Options
	// Compression of the artifact.
	Compression Compression
	// SHA256 is the stored bytes' hex SHA-256, when known: a backup's.
	SHA256 string
	// Out is the file to write the snapshot to.
	Out string
	// Log receives progress; the zero Logger discards it.
	Log logr.Logger
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Fetch reads an artifact, checks the SHA-256 of the stored bytes when
// o.SHA256 is given, and writes them, decompressed, to o.Out. Out is
// written under a temporary name and renamed into place only when every
// check passed; on any failure, no Out is left, not even an older one. A
// mismatch, data that does not decompress, and a missing artifact are
// terminal. Without a SHA-256, damage that the compression's own checksums
// miss (and any, uncompressed) is left to etcdutl snapshot restore, which
// checks the SHA-256 that etcd appends to every snapshot.
func Fetch(ctx context.Context, o FetchOptions) (agentapi.Result, error) {
	r := agentapi.Result{Op: agentapi.OpFetch}
	loc, err := ParseURI(o.From)
	if err != nil {
		return r, err
	}
	if o.Compression, err = ParseCompression(string(o.Compression)); err != nil {
		return r, err
	}
	o.SHA256 = strings.ToLower(o.SHA256)
	if o.SHA256 != "" && !hexSHA256.MatchString(o.SHA256) {
		return r, fmt.Errorf("%w: %q is not a hex SHA-256", ErrInvalid, o.SHA256)
	}
	if o.Out == "" || !filepath.IsAbs(o.Out) {
		return r, fmt.Errorf("%w: the output %q must be an absolute path", ErrInvalid, o.Out)
	}
	if _, ok := ctx.Deadline(); !ok {
		return r, fmt.Errorf("%w: the fetch has no deadline", ErrInvalid)
	}
	if err := os.Remove(o.Out); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return r, err
	}
	st, err := openStore(ctx, loc, o.S3)
	if err != nil {
		return r, err
	}
	body, size, err := st.open(ctx, "")
	if err != nil {
		return r, err
	}
	defer body.Close()

	got, err := fetchTo(body, size, o)
	if err != nil {
		return r, err
	}
	o.Log.Info("Fetched the artifact", "from", loc.URI, "sizeBytes", got.SizeBytes, "sha256", got.SHA256, "out", o.Out)
	r.Artifact = &agentapi.Artifact{URI: loc.URI, SizeBytes: got.SizeBytes, SHA256: got.SHA256, Compression: string(o.Compression)}
	return r, nil
}

// fetchTo decompresses body into a temporary file beside o.Out, checks
// the stored bytes, and renames the file to o.Out.
func fetchTo(body io.Reader, size int64, o FetchOptions) (_ written, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(o.Out), "."+filepath.Base(o.Out)+".tmp-*")
	if err != nil {
		return written{}, err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	sum := &counter{h: sha256.New()}
	src := &sourceReader{r: io.TeeReader(body, sum)}
	decompressErr := decompressTo(tmp, src, o.Compression)
	if decompressErr != nil && (!errors.Is(decompressErr, ErrCorrupt) || o.SHA256 == "") {
		return written{}, decompressErr
	}
	// Read what the decompressor left: trailing bytes are stored bytes
	// too, and a SHA-256 must see them; so must damaged ones, when the
	// SHA-256 is known, to say which bytes are wrong rather than that they
	// do not decompress.
	if _, err := io.Copy(io.Discard, src); err != nil {
		return written{}, src.unwrap(err)
	}
	got := written{SizeBytes: sum.n, SHA256: sum.sum()}
	if size >= 0 && size != got.SizeBytes {
		return written{}, fmt.Errorf("%w: the store says the artifact has %d bytes and sent %d", ErrChecksum, size, got.SizeBytes)
	}
	if o.SHA256 != "" && got.SHA256 != o.SHA256 {
		return written{}, fmt.Errorf("%w: the artifact's %d bytes have SHA-256 %s, not %s", ErrChecksum, got.SizeBytes, got.SHA256, o.SHA256)
	}
	if decompressErr != nil {
		// The bytes are the backup's, and still do not decompress.
		return written{}, decompressErr
	}
	if err := tmp.Sync(); err != nil {
		return written{}, err
	}
	if err := tmp.Close(); err != nil {
		return written{}, err
	}
	if err := os.Rename(tmp.Name(), o.Out); err != nil {
		return written{}, err
	}
	return got, syncDir(filepath.Dir(o.Out))
}

// decompressTo writes what src holds, decompressed, to w. An error of
// reading src is returned as it is (a network error: retry); any other
// error of the decompressor means the data is damaged: ErrCorrupt.
func decompressTo(w io.Writer, src *sourceReader, c Compression) error {
	zr, err := c.decompressor(src)
	if err != nil {
		return src.unwrap(fmt.Errorf("%w: reading the %s header: %w", ErrCorrupt, c, err))
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := io.Copy(markWrites{bw}, readerOnly{zr}); err != nil {
		var werr *writeError
		if errors.As(err, &werr) {
			return werr.err
		}
		return src.unwrap(fmt.Errorf("%w: decompressing (%s): %w", ErrCorrupt, c, err))
	}
	if err := zr.Close(); err != nil {
		return src.unwrap(fmt.Errorf("%w: decompressing (%s): %w", ErrCorrupt, c, err))
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return nil
}

// readerOnly hides a reader's WriteTo, so that io.Copy writes through
// its own buffer and a write error comes back marked as one.
type readerOnly struct{ r io.Reader }

func (r readerOnly) Read(p []byte) (int, error) { return r.r.Read(p) }

// markWrites marks the errors of writing to w as writeErrors.
type markWrites struct{ w io.Writer }

func (m markWrites) Write(p []byte) (int, error) {
	n, err := m.w.Write(p)
	if err != nil {
		err = &writeError{err}
	}
	return n, err
}

// writeError marks an error of writing the output: neither the store's
// nor the data's.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// sourceReader remembers the error of reading the store, so that an error
// of the decompressor can be told from one of the network.
type sourceReader struct {
	r   io.Reader
	err error // the first error other than io.EOF
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
	return n, err
}

// unwrap returns the store's error when reading it failed, which explains
// err, and err otherwise.
func (s *sourceReader) unwrap(err error) error {
	if s.err != nil {
		return fmt.Errorf("reading the artifact: %w", s.err)
	}
	return err
}
