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

// storageVersion is the message with which etcd logs, at error level and
// with a stack trace, a failed update of its storage version. A new
// cluster's members each log it once when its cluster version is first
// set, before their backend has recorded a raft term ("missing term
// information"); etcd tries again every few seconds, and succeeds.
const storageVersion = "failed to update storage version"

// withoutStopNoise returns lg without etcd's reports of listeners closed
// by a stop, and of a new cluster's first storage-version update (see
// storageVersion); every other entry, and those messages with any other
// error, passes.
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
	if ent.Message == servingEnded && closedListener(fields) ||
		ent.Message == storageVersion && errorEnds(fields, "missing term information") {
		return nil
	}
	return c.Core.Write(ent, fields)
}

// closedListener reports whether fields hold an error that says a server
// or listener was closed.
func closedListener(fields []zapcore.Field) bool {
	return errorEnds(fields, "Server closed", "server closed", "use of closed network connection",
		"the server has been stopped") // a stop right after the start
}

// errorEnds reports whether the first error of fields ends with one of
// suffixes.
func errorEnds(fields []zapcore.Field, suffixes ...string) bool {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType {
			msg := err.Error()
			for _, s := range suffixes {
				if strings.HasSuffix(msg, s) {
					return true
				}
			}
			return false
		}
	}
	return false
}
