package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A stop's reports of closed listeners and a new cluster's first
// storage-version update are dropped; the same messages with another
// error, and every other entry, pass.
func TestWithoutStopNoise(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	lg := withoutStopNoise(zap.New(core)).Named("m0").With(zap.String("member", "m0"))
	lg.Error(servingEnded, zap.Error(http.ErrServerClosed))
	lg.Error(servingEnded, zap.Error(errors.New("mux: server closed")))
	lg.Error(servingEnded, zap.Error(errors.New("accept tcp 127.0.0.1:2379: use of closed network connection")))
	lg.Error(servingEnded, zap.Error(errors.New("grpc: the server has been stopped")))
	lg.Error(servingEnded, zap.Error(errors.New("listen tcp 127.0.0.1:2379: bind: address already in use")))
	lg.Error("another failure", zap.Error(http.ErrServerClosed))
	lg.Error(storageVersion, zap.String("cluster-version", "3.7.0"), zap.Error(errors.New("cannot detect storage schema version: missing term information")))
	lg.Error(storageVersion, zap.Error(errors.New("disk full")))
	lg.Info("ready")
	var got []string
	for _, e := range logs.All() {
		got = append(got, fmt.Sprint(e.Message, " ", e.ContextMap()["error"]))
	}
	want := []string{
		servingEnded + " listen tcp 127.0.0.1:2379: bind: address already in use",
		"another failure http: Server closed",
		storageVersion + " disk full",
		"ready <nil>",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries passed: %q; want %q", got, want)
	}
}
