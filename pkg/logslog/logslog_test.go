package logslog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcdlock/etcdlock/pkg/logslog"
)

type pair struct{ a, b int }

func (p pair) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddInt("a", p.a)
	enc.AddInt("b", p.b)
	return nil
}

// entries logs through New over a JSON handler at level and returns what
// arrived, one map per entry, without the time.
func entries(t *testing.T, level slog.Level, log func(*zap.Logger)) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	log(logslog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level})))
	var out []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		delete(m, "time")
		out = append(out, m)
	}
	return out
}

func TestLevelsFieldsAndErrorsArrive(t *testing.T) {
	got := entries(t, slog.LevelInfo, func(l *zap.Logger) {
		l.Debug("not enabled")
		l = l.Named("lock").With(zap.String("session", "s1"))
		l.Info("acquired", zap.String("name", "job"), zap.Int64("token", 7), zap.Duration("wait", 1500000000))
		l.Warn("slow", zap.Object("pair", pair{1, 2}), zap.Strings("names", []string{"a", "b"}))
		l.Error("lost", zap.Error(fmt.Errorf("renew: %w", errors.New("deadline passed"))), zap.Namespace("ctx"), zap.Bool("retry", true))
	})
	want := []map[string]any{
		{"level": "INFO", "msg": "acquired", "logger": "lock", "session": "s1", "name": "job", "token": 7.0, "wait": 1.5e9},
		{"level": "WARN", "msg": "slow", "logger": "lock", "session": "s1", "pair": map[string]any{"a": 1.0, "b": 2.0}, "names": []any{"a", "b"}},
		{"level": "ERROR", "msg": "lost", "logger": "lock", "session": "s1", "error": "renew: deadline passed", "ctx": map[string]any{"retry": true}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// An error field reaches the handler as the error itself, for handlers
// that unwrap or match it.
func TestErrorIsAnErrorValue(t *testing.T) {
	sentinel := errors.New("sentinel")
	var got error
	h := handlerFunc(func(r slog.Record) {
		r.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && a.Key == "error" {
				got = err
			}
			return true
		})
	})
	logslog.New(h).Error("x", zap.Error(fmt.Errorf("wrapped: %w", sentinel)))
	if !errors.Is(got, sentinel) {
		t.Errorf("the handler got %v, want an error wrapping the sentinel", got)
	}
}

func TestLevel(t *testing.T) {
	for zl, want := range map[zapcore.Level]slog.Level{
		zapcore.DebugLevel: slog.LevelDebug, zapcore.InfoLevel: slog.LevelInfo, zapcore.WarnLevel: slog.LevelWarn,
		zapcore.ErrorLevel: slog.LevelError, zapcore.DPanicLevel: slog.LevelError + 4, zapcore.PanicLevel: slog.LevelError + 8,
		zapcore.FatalLevel: slog.LevelError + 12,
	} {
		if got := logslog.Level(zl); got != want {
			t.Errorf("Level(%v) = %v, want %v", zl, got, want)
		}
	}
}

func TestNilHandlerIsNop(t *testing.T) {
	if l := logslog.New(nil); l.Core().Enabled(zapcore.FatalLevel) {
		t.Errorf("New(nil) writes somewhere")
	}
}

// handlerFunc is a slog.Handler that enables everything and calls f.
type handlerFunc func(slog.Record)

func (f handlerFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (f handlerFunc) Handle(_ context.Context, r slog.Record) error { f(r); return nil }
func (f handlerFunc) WithAttrs([]slog.Attr) slog.Handler            { return f }
func (f handlerFunc) WithGroup(string) slog.Handler                 { return f }
