// Package logging builds the console logger that the etcdlock commands
// (etcdlock and etcdlock-dev) write to stderr.
package logging

import (
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger writing console lines to w (stderr, or a queue in
// front of it) from level on (zap's level names: debug, info, warn, error,
// ...). Its only error is an unknown level.
func New(level string, w io.Writer) (*zap.Logger, error) {
	var l zapcore.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	// No sampling: a command logs little, and the sampler's counters are a
	// 448 KB allocation on every invocation (measured with pprof).
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(w), zap.NewAtomicLevelAt(l))
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel), zap.ErrorOutput(zapcore.AddSync(w))), nil
}
