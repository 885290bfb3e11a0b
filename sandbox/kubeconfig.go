package sandbox

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigCluster is the cluster name in every kubeconfig WriteKubeconfig
// writes, by which `sandbox up` knows a kubeconfig of a sandbox from any
// other file before it replaces one.
const KubeconfigCluster = "budgetguard-sandbox"

// WriteKubeconfig writes a kubeconfig (mode 0600) for another process:
// kube-apiserver at Config.Host, verified with ServingCAData, and the bearer
// token token, e.g. Config.BearerToken for the privileged loopback user or
// a ServiceAccount's token from the TokenRequest API. user names the
// kubeconfig's user and context.
func (cp *ControlPlane) WriteKubeconfig(path, user, token string) error {
	kc := clientcmdapi.NewConfig()
	c := clientcmdapi.NewCluster()
	c.Server = cp.Config.Host
	c.CertificateAuthorityData = cp.ServingCAData
	kc.Clusters[KubeconfigCluster] = c
	auth := clientcmdapi.NewAuthInfo()
	auth.Token = token
	kc.AuthInfos[user] = auth
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo = KubeconfigCluster, user
	kc.Contexts[user] = ctx
	kc.CurrentContext = user
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
