// Package logging builds the console logger that the etcdlock commands
// (etcdlock and etcdlock-dev) write to stderr.
package logging

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger writing console lines to stderr from level on
// (zap's level names: debug, info, warn, error, ...). Its only error is an
// unknown level: stderr and the console encoder always open.
func New(level string) (*zap.Logger, error) {
	var l zapcore.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, err
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(l)
	cfg.Encoding = "console"
	// No sampling: a command logs little, and the sampler's counters are a
	// 448 KB allocation on every invocation (measured with pprof).
	cfg.Sampling = nil
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.OutputPaths, cfg.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	return cfg.Build()
}
