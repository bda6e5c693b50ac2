package logslog

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// LoggerKey is the attribute that carries a named logger's name.
const LoggerKey = "logger"

// New returns a logger that writes every entry h enables to h. A nil h
// returns zap.NewNop().
func New(h slog.Handler) *zap.Logger {
	if h == nil {
		return zap.NewNop()
	}
	return zap.New(&core{h: h})
}

// core is a zapcore.Core over a slog.Handler; With's fields become the
// handler's WithAttrs.
type core struct{ h slog.Handler }

var _ zapcore.Core = (*core)(nil)

// Level is the slog level of a zap level.
func Level(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	case l == zapcore.ErrorLevel:
		return slog.LevelError
	default: // DPanic, Panic, Fatal
		return slog.LevelError + slog.Level(4*(l-zapcore.ErrorLevel))
	}
}

func (c *core) Enabled(l zapcore.Level) bool { return c.h.Enabled(context.Background(), Level(l)) }

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return c
	}
	return &core{h: c.h.WithAttrs(attrs(fields))}
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	r := slog.NewRecord(t, Level(e.Level), e.Message, e.Caller.PC)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String(LoggerKey, e.LoggerName))
	}
	r.AddAttrs(attrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

// Sync has nothing to flush: a slog.Handler writes in Handle.
func (c *core) Sync() error { return nil }

// attrs converts zap fields to slog attributes.
func attrs(fields []zapcore.Field) []slog.Attr {
	out := make([]slog.Attr, 0, len(fields))
	for i, f := range fields {
		switch f.Type {
		case zapcore.SkipType:
			continue
		case zapcore.ErrorType:
			if err, ok := f.Interface.(error); ok {
				out = append(out, slog.Any(f.Key, err))
				continue
			}
		case zapcore.NamespaceType:
			// A namespace nests the fields after it; slog nests with a
			// group, so the rest of the fields go inside one.
			rest := attrs(fields[i+1:])
			return append(out, slog.Attr{Key: f.Key, Value: slog.GroupValue(rest...)})
		}
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
			out = append(out, value(k, enc.Fields[k]))
		}
	}
	return out
}

// value is the attribute of a value a zapcore.MapObjectEncoder produced.
func value(k string, v any) slog.Attr {
	if m, ok := v.(map[string]any); ok {
		group := make([]slog.Attr, 0, len(m))
		for _, gk := range slices.Sorted(maps.Keys(m)) {
			group = append(group, value(gk, m[gk]))
		}
		return slog.Attr{Key: k, Value: slog.GroupValue(group...)}
	}
	return slog.Any(k, v)
}
