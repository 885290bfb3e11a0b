package kubectlplugin

import (
	"context"
	goflag "flag"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// logFlags are the klog flags the plugin takes, as kubectl does: -v/--v
// for the verbosity (at 6 and more client-go logs each request) and
// --vmodule.
var logFlags = []string{"v", "vmodule"}

// addLogFlags adds logFlags to fs. Cobra then gives --version no -v
// shorthand: -v is the verbosity, as in kubectl.
func addLogFlags(fs *pflag.FlagSet) {
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	for _, name := range logFlags {
		fs.AddFlag(pflag.PFlagFromGoFlag(klogFlags.Lookup(name)))
	}
}

// restoreVerbosity returns a function that sets klog's flags back to the
// values they had before root parsed its arguments: they are process-wide,
// and Execute may run more than once in a process (in tests).
func restoreVerbosity(root *cobra.Command) func() {
	before := map[string]string{}
	for _, name := range logFlags {
		before[name] = root.PersistentFlags().Lookup(name).Value.String()
	}
	return func() {
		for name, v := range before {
			f := root.PersistentFlags().Lookup(name)
			if f.Value.String() != v {
				_ = f.Value.Set(v)
			}
		}
	}
}

// completeTimeout bounds how long a completion may take the cluster.
const completeTimeout = 5 * time.Second

// completePods completes why's argument with the names of the pods of the
// namespace (-n, or the kubeconfig's), as NAME or, once "pod/" is typed, as
// pod/NAME. It completes nothing when the cluster cannot be read.
func (o *options) completePods(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	prefix := ""
	if kind, _, typed := strings.Cut(toComplete, "/"); typed {
		prefix = kind + "/"
		if _, err := podName(kind + "/x"); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for _, p := range list.Items {
		if name := prefix + p.Name; strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
