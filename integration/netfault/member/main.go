// Command member serves one etcd member of the network fault harness,
// inside the network namespace the harness runs it in. It is the etcd
// server the project embeds (pkg/embedded starts the same embed.Etcd with
// the same defaults: fsync on, 100 ms heartbeat, 1 s election timeout),
// on the harness's addresses rather than loopback, which etcdlock-dev and
// pkg/embedded accept only. It prints "ready" once the member serves, and
// stops on SIGTERM or SIGINT; on its existing data directory it rejoins
// the cluster it was part of.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	os.Exit(run())
}

func run() int {
	name := flag.String("name", "", "member name")
	dir := flag.String("dir", "", "data directory")
	client := flag.String("client", "", "client URL (http://IP:PORT)")
	peer := flag.String("peer", "", "peer URL (http://IP:PORT)")
	initial := flag.String("initial-cluster", "", "name=peerURL,...")
	token := flag.String("token", "", "initial cluster token")
	flag.Parse()
	cu, err := url.Parse(*client)
	if err != nil {
		fmt.Fprintln(os.Stderr, "member: --client:", err)
		return 2
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		fmt.Fprintln(os.Stderr, "member: --peer:", err)
		return 2
	}
	lg, err := zap.NewProduction()
	if err != nil {
		fmt.Fprintln(os.Stderr, "member:", err)
		return 1
	}
	lg = lg.WithOptions(zap.IncreaseLevel(zap.ErrorLevel)).Named(*name)
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = *name, *dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster, cfg.InitialClusterToken = *initial, *token
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "member: start:", err)
		return 1
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "member:", err)
		return 1
	case <-sig:
		return 0
	}
	select {
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "member:", err)
		return 1
	case <-sig:
		return 0
	}
}
