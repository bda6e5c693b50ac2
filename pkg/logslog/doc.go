// Package logslog gives a *zap.Logger that writes to a log/slog handler,
// so that a program logging with log/slog passes its handler wherever
// etcdlock takes a *zap.Logger (lock.WithLogger, which election.New and
// kubelock.New take too):
//
//	session, err := lock.NewSession(ctx, cli, lock.WithLogger(logslog.New(slog.Default().Handler())))
//
// Levels map to slog's (zap's Debug, Info, Warn and Error to slog's four;
// DPanic, Panic and Fatal to slog.LevelError+4, +8 and +12); the handler's
// Enabled decides what is written. Fields become attributes: an error
// field stays an error value, a zap.Object or zap.Array becomes a
// slog.Group or a slice, a named logger adds a "logger" attribute.
package logslog
