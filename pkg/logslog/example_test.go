package logslog_test

import (
	"log/slog"
	"os"

	"go.uber.org/zap"

	"github.com/etcdlock/etcdlock/pkg/logslog"
)

// A program that logs with log/slog hands its handler to etcdlock as a
// *zap.Logger (here a text handler without times, for a stable output).
func Example() {
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	logger := logslog.New(h) // for lock.WithLogger, election.Config.Logger, kubelock.WithLogger
	logger.Named("lock").Info("acquired", zap.String("name", "nightly-report"), zap.Int64("token", 42))
	logger.Debug("not shown: the handler's level is Info")
	// Output:
	// level=INFO msg=acquired logger=lock name=nightly-report token=42
}
