//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package guardian

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestMessagesCrossThePipeUnchanged(t *testing.T) {
	big := bytes.Repeat([]byte{0xff, 'x', 0}, 200_000)
	msgs := []message{
		{Op: opReady},
		{
			Op:         opConfig,
			Argv:       [][]byte{[]byte("sh"), {}, []byte("-c"), {0xc3, 0x28, '\n'}},
			Env:        [][]byte{[]byte("A=1"), []byte("B=\xfe\xff"), big},
			KillSignal: 15, KillGrace: 10e9,
			Foreground: true, JSONNotes: true, Quiet: true,
			Soft: 1 << 62, Hard: -(1 << 62),
		},
		{Op: opStop, Reason: "lock lost: key deleted", Grace: 0},
		{Op: opExit, Code: 137, Signal: 9, Pid: 1<<31 - 1, Reason: "ü"},
		{Op: opDeadline, Soft: -1, Hard: 0},
	}
	var pipe bytes.Buffer
	for _, m := range msgs {
		if err := writeMessage(&pipe, m); err != nil {
			t.Fatal(err)
		}
	}
	mr := newMessageReader(&pipe)
	for i, want := range msgs {
		got, err := mr.read()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("message %d: got %+v, want %+v", i, summary(got), summary(want))
		}
	}
	if _, err := mr.read(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// An empty list is received as none, as the guardian reads an empty
// environment (see Run).
func TestEmptyListsArriveAsNone(t *testing.T) {
	var pipe bytes.Buffer
	if err := writeMessage(&pipe, message{Op: opConfig, Argv: [][]byte{[]byte("true")}, Env: [][]byte{}}); err != nil {
		t.Fatal(err)
	}
	m, err := newMessageReader(&pipe).read()
	if err != nil {
		t.Fatal(err)
	}
	if m.Env != nil || len(m.Argv) != 1 {
		t.Fatalf("got argv %q env %q, want [true] and nil", m.Argv, m.Env)
	}
}

func TestMalformedFramesAreRefused(t *testing.T) {
	var good bytes.Buffer
	if err := writeMessage(&good, message{Op: opConfig, Argv: [][]byte{[]byte("true")}, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	frame := good.Bytes()
	n, k := binary.Uvarint(frame)
	payload := frame[k:]
	if int(n) != len(payload) {
		t.Fatalf("frame length %d, payload %d", n, len(payload))
	}
	reframe := func(p []byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(p))), p...) }
	cases := map[string][]byte{
		"cut in the length":  {0x80},
		"cut in the payload": frame[:len(frame)-1],
		"a byte too many":    reframe(append(bytes.Clone(payload), 0)),
		"a field missing":    reframe(payload[:len(payload)-1]),
		"a flag that is not 0 or 1": func() []byte {
			var b bytes.Buffer
			_ = writeMessage(&b, message{Op: opConfig, Foreground: true})
			raw := b.Bytes()
			i := bytes.IndexByte(raw[2:], 1) + 2 // the first flag, after op "config" and two empty lists
			raw[i] = 2
			return raw
		}(),
		"a list longer than the frame": reframe([]byte{1, 'x', 0xff, 0x7f}),
		"a frame over the bound":       binary.AppendUvarint(nil, maxFrame+1),
		"a length that overflows":      bytes.Repeat([]byte{0xff}, 11),
	}
	for name, raw := range cases {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			m, err := newMessageReader(bytes.NewReader(raw)).read()
			if err == nil {
				t.Fatalf("read %+v, want an error", summary(m))
			}
			if err == io.EOF || !errors.Is(err, errBadFrame) {
				t.Fatalf("error %v, want one wrapping errBadFrame (not io.EOF: the stream did not end between frames)", err)
			}
		})
	}
}

// summary keeps a failure's output short when a message holds a large
// environment.
func summary(m message) message {
	for i, e := range m.Env {
		if len(e) > 40 {
			m.Env = append(m.Env[:i:i], append([]byte(nil), e[:40]...))
		}
	}
	return m
}
