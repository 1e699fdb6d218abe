package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/harness-edge/harness-edge/runtime/task"
	"github.com/harness-edge/harness-edge/statefmt"
)

// MaxEditSize is the largest file edit_file loads whole (it must hold the file to rewrite it).
const MaxEditSize = 16 << 20

// errSpecial refuses a FIFO, device or socket: opening or reading one can block for ever or
// never end.
var errSpecial = errors.New("is not a regular file (FIFOs, devices and sockets are refused)")

// openRegular opens a workspace file that must be a regular file. The open itself is
// non-blocking, so a FIFO swapped in after any check cannot hang it; the descriptor is checked
// after the open (what was opened is what is read), and then set back to blocking.
func openRegular(root *os.Root, p string, flag int, perm fs.FileMode) (*os.File, error) {
	if info, err := root.Lstat(p); err == nil && !info.Mode().IsRegular() && info.Mode()&fs.ModeSymlink == 0 {
		if info.IsDir() {
			return nil, fmt.Errorf("%s is a directory", p)
		}
		return nil, fmt.Errorf("%s %w", p, errSpecial)
	}
	f, err := root.OpenFile(p, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, syscall.ENXIO) { // a FIFO opened for writing with no reader
			return nil, fmt.Errorf("%s %w", p, errSpecial)
		}
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		if info.IsDir() {
			return nil, fmt.Errorf("%s is a directory", p)
		}
		return nil, fmt.Errorf("%s %w", p, errSpecial)
	}
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}
	return f, nil
}

// ctxReader fails reads once its context is done, so that a long scan stops when the call is
// cancelled (pause, stop, a signal, a timeout).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// lineReaders keeps readLines' buffers from call to call: a fresh one per call cost more than
// reading the lines. Its size bounds a read, not a line (a longer line is read in pieces).
var lineReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// readLines streams the lines [offset, offset+n) of a workspace file (offset 1-based; n ≤ 0:
// to the end) into at most limit bytes of output. Memory stays bounded whatever the file's size
// or line lengths: skipped lines are never kept, and the output stops at the cap.
func readLines(ctx context.Context, root *os.Root, p string, offset, n, limit int) statefmt.ToolResult {
	if limit <= 0 {
		limit = task.DefaultMaxOutput
	}
	if offset < 0 || n < 0 {
		return Failed(statefmt.ErrorPermanent, "offset and limit must not be negative")
	}
	f, err := openRegular(root, p, os.O_RDONLY, 0)
	if err != nil {
		return Failed(statefmt.ErrorPermanent, "%v", err)
	}
	defer f.Close()
	br := lineReaders.Get().(*bufio.Reader)
	br.Reset(ctxReader{ctx, f})
	defer func() { br.Reset(nil); lineReaders.Put(br) }()
	var out strings.Builder
	line, taken := 1, 0
	from := max(offset, 1)
	for n <= 0 || taken < n {
		chunk, err := br.ReadSlice('\n')
		if line >= from && len(chunk) > 0 {
			if out.Len()+len(chunk) > limit {
				out.Write(chunk[:limit-out.Len()])
				return statefmt.ToolResult{Success: true, Output: strings.ToValidUTF8(out.String(), ""), Truncated: true}
			}
			out.Write(chunk)
		}
		switch {
		case err == nil: // a whole line
			if line >= from {
				taken++
			}
			line++
		case errors.Is(err, bufio.ErrBufferFull): // the line goes on
		case errors.Is(err, io.EOF):
			return statefmt.ToolResult{Success: true, Output: strings.ToValidUTF8(out.String(), "")}
		default:
			if ctx.Err() != nil {
				return Failed(statefmt.ErrorPermanent, "cancelled")
			}
			return Failed(statefmt.ErrorPermanent, "%v", err)
		}
	}
	return statefmt.ToolResult{Success: true, Output: strings.ToValidUTF8(out.String(), "")}
}

// readForEdit loads a workspace file whole for edit_file: a regular file of at most
// MaxEditSize bytes.
func readForEdit(ctx context.Context, root *os.Root, p string) ([]byte, fs.FileMode, error) {
	f, err := openRegular(root, p, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if info.Size() > MaxEditSize {
		return nil, 0, fmt.Errorf("%s is %d bytes, more than edit_file loads (%d): use bash", p, info.Size(), MaxEditSize)
	}
	data, err := io.ReadAll(io.LimitReader(ctxReader{ctx, f}, MaxEditSize+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > MaxEditSize {
		return nil, 0, fmt.Errorf("%s grew past %d bytes while it was read", p, MaxEditSize)
	}
	return data, info.Mode().Perm(), nil
}

// writeRegular writes a workspace file, refusing special files (a FIFO would block the write).
func writeRegular(root *os.Root, p string, data []byte, perm fs.FileMode) error {
	f, err := openRegular(root, p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// MaxGrepFileSize is the largest file grep searches; MaxGrepLine the longest line it matches
// (a longer line is skipped, and the lines after it are searched).
const (
	MaxGrepFileSize = 16 << 20
	MaxGrepLine     = 1 << 20
)

// grepFile appends a file's matching lines to out as "path:line:text", streaming it with a
// bounded line buffer. It skips binary and unreadable files and lines over MaxGrepLine, and
// reports stop once out holds more than limit bytes; the error is the context's when the call
// was cancelled.
func grepFile(ctx context.Context, root *os.Root, p string, re *regexp.Regexp, out *strings.Builder, limit int) (stop bool, err error) {
	f, err := openRegular(root, p, os.O_RDONLY, 0)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	br := bufio.NewReaderSize(ctxReader{ctx, io.LimitReader(f, MaxGrepFileSize)}, 64<<10)
	if head, _ := br.Peek(8000); bytes.IndexByte(head, 0) >= 0 {
		return false, ctx.Err() // binary
	}
	var buf []byte
	for n := 1; ; n++ {
		line, kept, err := nextLine(br, buf[:0], MaxGrepLine)
		buf = line
		if len(line) == 0 && kept && err != nil {
			return false, ctx.Err() // the end of the file, or a read error: the rest is not read
		}
		if text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r")); kept && re.Match(text) {
			fmt.Fprintf(out, "%s:%d:%s\n", p, n, text)
			if out.Len() > limit {
				return true, nil
			}
		}
		if err != nil {
			return false, ctx.Err()
		}
	}
}

// nextLine appends br's next line (with its newline) to buf. A line of more than most bytes
// (its newline aside) is read to its end and not kept: kept is false and line empty.
func nextLine(br *bufio.Reader, buf []byte, most int) (line []byte, kept bool, err error) {
	kept = true
	for {
		chunk, err := br.ReadSlice('\n')
		if kept && len(buf)+len(chunk) > most+1 {
			kept, buf = false, buf[:0]
		} else if kept {
			buf = append(buf, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, kept, err
		}
	}
}

// ctxFS fails every open once its context is done, so that a walk over a large tree stops
// when the call is cancelled.
type ctxFS struct {
	ctx context.Context
	fs.FS
}

func (c ctxFS) Open(name string) (fs.File, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	return c.FS.Open(name)
}
