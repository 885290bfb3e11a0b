package app

import (
	"errors"
	"fmt"
	"io"

	kruiseclientset "github.com/openkruise/kruise-api/client/clientset/versioned"
	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	deschedulerapp "sigs.k8s.io/descheduler/cmd/descheduler/app"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"

	"github.com/budgetguard/budgetguard/internal/deschedulerpolicy"
	"github.com/budgetguard/budgetguard/internal/version"
	"github.com/budgetguard/budgetguard/plugins/budget"
	"github.com/budgetguard/budgetguard/plugins/budgetevictor"
)

// NewDeschedulerCommand returns the stock descheduler command with
// BudgetAwareEvictor registered, strict policy checking, a report of where
// BudgetAwareEvictor is enabled in each profile, budgetguard_build_info, and
// the flags --validate-only and --version.
func NewDeschedulerCommand(out io.Writer) *cobra.Command {
	cmd := deschedulerapp.NewDeschedulerCommand(out)
	stockPreRun, stockRun := cmd.PreRunE, cmd.RunE
	if stockPreRun == nil || stockRun == nil {
		// The stock command changed shape; fail loudly rather than run
		// without the plugin.
		panic("budgetguard: the stock descheduler command has no PreRunE or RunE")
	}
	var validateOnly, printVersion bool
	cmd.Flags().BoolVar(&validateOnly, "validate-only", false, "Check the policy file (--policy-config-file) as the descheduler would load it, without a cluster, and exit: 0 when it is valid, else non-zero with the errors.")
	cmd.Flags().BoolVar(&printVersion, "version", false, "Print budgetguard's version and the Kubernetes and descheduler versions it embeds, and exit.")
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := stockPreRun(c, args); err != nil {
			return err
		}
		budgetevictor.Register(pluginregistry.PluginRegistry, budgetevictor.Options{Kruise: kruiseFromFlags(c), PUBv1beta1: pubV1beta1FromFlags(c), Workloads: workloadsFromFlags(c)})
		return nil
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if printVersion {
			_, err := fmt.Fprintln(c.OutOrStdout(), version.Get())
			return err
		}
		path := ""
		if f := c.Flags().Lookup("policy-config-file"); f != nil {
			path = f.Value.String()
		}
		if validateOnly {
			return validate(c.OutOrStdout(), c.ErrOrStderr(), path)
		}
		version.RegisterMetrics()
		if path != "" {
			policy, err := deschedulerpolicy.ValidatePolicyFile(path, pluginregistry.PluginRegistry)
			if err != nil {
				return err
			}
			logger := klog.FromContext(c.Context())
			for _, p := range deschedulerpolicy.ProfilePlugins(policy) {
				budget.ReportProfile(logger, "descheduler", p.Name, p.Plugins)
			}
		}
		return stockRun(c, args)
	}
	return cmd
}

// validate is --validate-only: it prints "policy PATH is valid" to out, or
// each error on a line of its own to errOut and returns an error.
func validate(out, errOut io.Writer, path string) error {
	if path == "" {
		return errors.New("--validate-only needs --policy-config-file")
	}
	_, err := deschedulerpolicy.ValidatePolicyFile(path, pluginregistry.PluginRegistry)
	if err == nil {
		_, err = fmt.Fprintf(out, "policy %s is valid\n", path)
		return err
	}
	errs := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		errs = utilerrors.Flatten(agg).Errors()
	}
	fmt.Fprintf(errOut, "policy %s is invalid:\n", path)
	for _, e := range errs {
		fmt.Fprintf(errOut, "  %v\n", e)
	}
	return fmt.Errorf("policy %s is invalid", path)
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

// pubV1beta1FromFlags builds the client of policy.kruise.io/v1beta1
// PodUnavailableBudgets of the cluster the flags name.
func pubV1beta1FromFlags(c *cobra.Command) func() (rest.Interface, error) {
	return func() (rest.Interface, error) {
		cfg, err := restConfigFromFlags(c)
		if err != nil {
			return nil, err
		}
		return budget.NewPUBv1beta1Client(cfg)
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
