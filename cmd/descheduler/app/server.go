package app

import (
	"fmt"
	"io"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	deschedulerapp "sigs.k8s.io/descheduler/cmd/descheduler/app"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/budgetguard/budgetguard/internal/deschedulerpolicy"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

// NewDeschedulerCommand returns the stock descheduler command with
// BudgetAwareEvictor registered and strict policy checking.
func NewDeschedulerCommand(out io.Writer) *cobra.Command {
	cmd := deschedulerapp.NewDeschedulerCommand(out)
	stockPreRun, stockRun := cmd.PreRunE, cmd.RunE
	if stockPreRun == nil || stockRun == nil {
		// The stock command changed shape; fail loudly rather than run
		// without the plugin.
		panic("budgetguard: the stock descheduler command has no PreRunE or RunE")
	}
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := stockPreRun(c, args); err != nil {
			return err
		}
		budgetevictor.Register(pluginregistry.PluginRegistry, budgetevictor.Options{Kruise: kruiseFromFlags(c), Workloads: workloadsFromFlags(c)})
		return nil
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("policy-config-file"); f != nil && f.Value.String() != "" {
			if err := deschedulerpolicy.CheckPolicyFile(f.Value.String(), pluginregistry.PluginRegistry); err != nil {
				return err
			}
		}
		return stockRun(c, args)
	}
	return cmd
}

// restConfigFromFlags builds a client config from the same kubeconfig flags
// the descheduler reads (in-cluster otherwise).
func restConfigFromFlags(c *cobra.Command) (*rest.Config, error) {
	kubeconfig := ""
	for _, name := range []string{"client-connection-kubeconfig", "kubeconfig"} {
		if f := c.Flags().Lookup(name); f != nil && f.Value.String() != "" {
			kubeconfig = f.Value.String()
			break
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("building a client config: %w", err)
	}
	return cfg, nil
}

// kruiseFromFlags builds the Kruise clientset and discovery client of the
// cluster the descheduler's flags name.
func kruiseFromFlags(c *cobra.Command) budgetevictor.KruiseClients {
	return func() (kruiseclientset.Interface, discovery.DiscoveryInterface, error) {
		cfg, err := restConfigFromFlags(c)
		if err != nil {
			return nil, nil, err
		}
		kc, err := kruiseclientset.NewForConfig(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("building a Kruise client: %w", err)
		}
		disc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("building a discovery client: %w", err)
		}
		return kc, disc, nil
	}
}

// workloadsFromFlags builds a client of the real cluster, from which a dry
// run reads ReplicaSets, Deployments and StatefulSets.
func workloadsFromFlags(c *cobra.Command) func() (kubernetes.Interface, error) {
	return func() (kubernetes.Interface, error) {
		cfg, err := restConfigFromFlags(c)
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(rest.AddUserAgent(cfg, "descheduler"))
	}
}
