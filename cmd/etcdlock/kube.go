package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlock/etcdlock/fencing"
	"github.com/etcdlock/etcdlock/pkg/kuberecord"
)

type kubeOptions struct{ prefix string }

// kubeView is one election of `kube-leaders`: its record, as `kubectl get
// lease` shows a Lease's.
type kubeView struct {
	Name        string        `json:"name"`
	Holder      string        `json:"holder"`
	Token       fencing.Token `json:"token"`
	Lease       string        `json:"lease"`
	Acquired    string        `json:"acquired"`
	Renewed     string        `json:"renewed"`
	Transitions int           `json:"transitions"`
}

func newKubeLeadersCommand(g *globalOptions) *cobra.Command {
	o := &kubeOptions{}
	cmd := &cobra.Command{
		Use:   "kube-leaders [NAME-PREFIX]",
		Short: "List who leads each Kubernetes controller's election on etcd (package kubelock)",
		Long: `List the leader records of Kubernetes controllers that elect their leader
with package kubelock (optionally those whose name starts with NAME-PREFIX):
the holder, the term's fencing token and etcd lease, when the term was acquired
and last renewed, and the number of terms before it (transitions). An election
whose leader released its record, whose record's lease expired, or whose record
was deleted by hand, has no line until the next term.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p string
			if len(args) == 1 {
				p = args[0]
			}
			return runKubeLeaders(cmd.Context(), g, o, p)
		},
	}
	cmd.Flags().StringVar(&o.prefix, "kube-prefix", kuberecord.DefaultPrefix, "etcd key prefix of the records (lock.WithPrefix given to kubelock.New); must end in '/'")
	return cmd
}

func runKubeLeaders(ctx context.Context, g *globalOptions, o *kubeOptions, namePrefix string) error {
	if !strings.HasSuffix(o.prefix, "/") {
		return usageErr("--kube-prefix %q: must end in '/'", o.prefix)
	}
	var views []kubeView
	err := g.read(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.Get(ctx, o.prefix+namePrefix, clientv3.WithPrefix())
		if err != nil {
			return err
		}
		views = views[:0]
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			if !kuberecord.IsRecordKey(key) {
				continue
			}
			r, err := kuberecord.Decode(key, kv.Value)
			if err != nil {
				return err
			}
			views = append(views, kubeView{
				Name: strings.TrimPrefix(key, o.prefix), Holder: r.HolderIdentity, Token: fencing.Token(kv.CreateRevision),
				Lease: fmt.Sprintf("%x", kv.Lease), Acquired: since(r.Acquired()), Renewed: since(r.Renewed()),
				Transitions: r.LeaderTransitions,
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	return g.printer.Print(views, func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tHOLDER\tTOKEN\tLEASE\tACQUIRED\tRENEWED\tTRANSITIONS")
		for _, v := range views {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", printable(v.Name), printable(v.Holder), v.Token, v.Lease, v.Acquired, v.Renewed, v.Transitions)
		}
		tw.Flush()
	})
}
