package main

import (
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// servingEnded is the message with which etcd's embed package logs, at
// error level and with a stack trace, each of its listeners that stops
// serving — also, once per listener, on every normal stop ("http: Server
// closed", "mux: server closed", "use of closed network connection", and
// "grpc: the server has been stopped" when the stop comes right after the
// start).
const servingEnded = "setting up serving from embedded etcd failed."

// withoutStopNoise returns lg without etcd's reports of listeners closed
// by a stop; every other entry, and that message with any other error,
// passes.
func withoutStopNoise(lg *zap.Logger) *zap.Logger {
	return lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return stopNoise{c} }))
}

type stopNoise struct{ zapcore.Core }

func (c stopNoise) With(fields []zapcore.Field) zapcore.Core { return stopNoise{c.Core.With(fields)} }

func (c stopNoise) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c stopNoise) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if ent.Message == servingEnded && closedListener(fields) {
		return nil
	}
	return c.Core.Write(ent, fields)
}

// closedListener reports whether fields hold an error that says a server
// or listener was closed.
func closedListener(fields []zapcore.Field) bool {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType {
			msg := err.Error()
			return strings.HasSuffix(msg, "Server closed") || strings.HasSuffix(msg, "server closed") ||
				strings.HasSuffix(msg, "use of closed network connection") ||
				strings.HasSuffix(msg, "the server has been stopped") // a stop right after the start
		}
	}
	return false
}
