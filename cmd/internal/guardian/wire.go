//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The messages travel as frames: the payload's length as a uvarint, then
// the payload, which holds every field of message in the order of its
// declaration: Op as a byte string, Argv and Env as a count and that many
// byte strings, the numbers as varints, the flags as one byte each, and
// Reason as a byte string; a byte string is its length as a uvarint and
// its bytes. Both ends are of one release (Protocol), so the format has no
// field tags and no versions of its own. It replaced JSON, whose first
// encoding of a message cost each process about a millisecond of CPU
// building its encoders by reflection; the guardian's start-up is on every
// `etcdlock run`.

// maxFrame bounds a frame's payload. The largest is the command's
// configuration: its arguments and environment, which the kernel bounds
// far below this (execve's E2BIG).
const maxFrame = 256 << 20

var errBadFrame = errors.New("guardian: malformed message")

// writeMessage sends m on w as one frame, in one write.
func writeMessage(w io.Writer, m message) error {
	var payload []byte
	payload = appendBytes(payload, []byte(m.Op))
	payload = appendList(payload, m.Argv)
	payload = appendList(payload, m.Env)
	for _, n := range []int64{int64(m.KillSignal), m.KillGrace} {
		payload = binary.AppendVarint(payload, n)
	}
	for _, b := range []bool{m.Foreground, m.JSONNotes, m.Quiet} {
		payload = append(payload, boolByte(b))
	}
	for _, n := range []int64{m.Soft, m.Hard, int64(m.Signal)} {
		payload = binary.AppendVarint(payload, n)
	}
	payload = appendBytes(payload, []byte(m.Reason))
	for _, n := range []int64{m.Grace, int64(m.Pid), int64(m.Code)} {
		payload = binary.AppendVarint(payload, n)
	}
	frame := binary.AppendUvarint(make([]byte, 0, len(payload)+binary.MaxVarintLen64), uint64(len(payload)))
	_, err := w.Write(append(frame, payload...))
	return err
}

func appendBytes(b, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendList encodes nil and an empty list alike: the receiver treats a
// missing environment as an empty one (see Run).
func appendList(b []byte, l [][]byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = appendBytes(b, s)
	}
	return b
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// messageReader reads the frames that writeMessage wrote.
type messageReader struct{ r *bufio.Reader }

func newMessageReader(r io.Reader) *messageReader {
	return &messageReader{bufio.NewReader(r)}
}

// read returns the next message: io.EOF at the end of the stream between
// frames, and another error for a stream that ends inside a frame or a
// frame that does not decode.
func (mr *messageReader) read() (message, error) {
	n, err := binary.ReadUvarint(mr.r)
	if err != nil {
		if err == io.EOF {
			return message{}, io.EOF
		}
		return message{}, fmt.Errorf("%w: %w", errBadFrame, err)
	}
	if n > maxFrame {
		return message{}, fmt.Errorf("%w: a frame of %d bytes", errBadFrame, n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(mr.r, payload); err != nil {
		return message{}, fmt.Errorf("%w: %w", errBadFrame, err)
	}
	d := decoder{b: payload}
	var m message
	m.Op = op(d.bytes())
	m.Argv = d.list()
	m.Env = d.list()
	m.KillSignal = int(d.varint())
	m.KillGrace = d.varint()
	m.Foreground, m.JSONNotes, m.Quiet = d.bool(), d.bool(), d.bool()
	m.Soft, m.Hard, m.Signal = d.varint(), d.varint(), int(d.varint())
	m.Reason = string(d.bytes())
	m.Grace, m.Pid, m.Code = d.varint(), int(d.varint()), int(d.varint())
	if d.bad || len(d.b) != 0 {
		return message{}, errBadFrame
	}
	return m, nil
}

// decoder takes fields off the front of a payload; bad is set, and zero
// values returned, once one does not decode.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 { return number(d, binary.Uvarint) }

func (d *decoder) varint() int64 { return number(d, binary.Varint) }

// number takes one number off d with decode (binary.Uvarint or Varint).
func number[T uint64 | int64](d *decoder, decode func([]byte) (T, int)) T {
	v, n := decode(d.b)
	if n <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad, d.b = true, nil
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

// list returns nil for an empty list, as the sender's nil or empty one.
func (d *decoder) list() [][]byte {
	n := d.uvarint()
	if n == 0 || n > uint64(len(d.b)) { // every element takes a byte at least
		if n != 0 {
			d.bad, d.b = true, nil
		}
		return nil
	}
	l := make([][]byte, 0, n)
	for range n {
		l = append(l, d.bytes())
	}
	return l
}

func (d *decoder) bool() bool {
	if len(d.b) == 0 {
		d.bad = true
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	if v > 1 {
		d.bad = true
	}
	return v == 1
}
