// Package localrun runs a workload of budgetguard's chart (the scheduler's
// or the descheduler's Deployment, or the descheduler's CronJob) as a
// process of this machine, as its pod would run it: the container's command
// line, the configuration its ConfigMap volume holds, and the identity of its
// ServiceAccount (a TokenRequest token). `sandbox run-chart` and test/e2e use
// it, so that what the chart installs is what runs.
package localrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// PodSpecOf returns the pod spec of a Deployment or CronJob given as an
// unstructured object (a rendering of the chart).
func PodSpecOf(workload *unstructured.Unstructured) (*corev1.PodSpec, error) {
	path := []string{"spec", "template", "spec"}
	if workload.GetKind() == "CronJob" {
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	m, ok, err := unstructured.NestedMap(workload.Object, path...)
	if err != nil || !ok {
		return nil, fmt.Errorf("%s %s has no pod spec (%s): %v", workload.GetKind(), workload.GetName(), strings.Join(path, "."), err)
	}
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
		return nil, fmt.Errorf("%s %s: %w", workload.GetKind(), workload.GetName(), err)
	}
	return &spec, nil
}

// Container returns the pod's one container.
func Container(spec *corev1.PodSpec) (*corev1.Container, error) {
	if len(spec.Containers) != 1 {
		return nil, fmt.Errorf("%d containers, want 1", len(spec.Containers))
	}
	return &spec.Containers[0], nil
}

// ConfigVolume returns the mount path and the ConfigMap name of the
// container's one volume mount, the component's configuration.
func ConfigVolume(spec *corev1.PodSpec) (mountPath, configMap string, err error) {
	c, err := Container(spec)
	if err != nil {
		return "", "", err
	}
	if len(c.VolumeMounts) != 1 {
		return "", "", fmt.Errorf("container %s: %d volume mounts, want the configuration's only", c.Name, len(c.VolumeMounts))
	}
	mount := c.VolumeMounts[0]
	for _, v := range spec.Volumes {
		if v.Name == mount.Name {
			if v.ConfigMap == nil {
				return "", "", fmt.Errorf("volume %s is not a ConfigMap", v.Name)
			}
			return mount.MountPath, v.ConfigMap.Name, nil
		}
	}
	return "", "", fmt.Errorf("container %s mounts volume %s, which the pod does not have", c.Name, mount.Name)
}

// Args returns the container's command line without the command itself,
// for a process of this machine: the configuration's mount path is
// configDir, --secure-port is port on 127.0.0.1, and the process
// authenticates with kubeconfig.
func Args(spec *corev1.PodSpec, configDir, kubeconfig string, port int) ([]string, error) {
	c, err := Container(spec)
	if err != nil {
		return nil, err
	}
	mountPath, _, err := ConfigVolume(spec)
	if err != nil {
		return nil, err
	}
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("container %s has no command", c.Name)
	}
	mountPath = strings.TrimSuffix(mountPath, "/") + "/"
	var argv []string
	for _, a := range append(append([]string{}, c.Command[1:]...), c.Args...) {
		if strings.HasPrefix(a, "--secure-port=") {
			a = fmt.Sprintf("--secure-port=%d", port)
		} else {
			a = strings.ReplaceAll(a, mountPath, strings.TrimSuffix(configDir, "/")+"/")
		}
		argv = append(argv, a)
	}
	return append(argv, "--kubeconfig="+kubeconfig, "--bind-address=127.0.0.1"), nil
}

// WriteConfig writes each data key of the ConfigMap into dir, as the
// volume would mount it.
func WriteConfig(data map[string]string, dir string) error {
	if len(data) == 0 {
		return errors.New("the configuration's ConfigMap has no data")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for key, value := range data {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(value), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// SetClientKubeconfig sets clientConnection.kubeconfig in the
// KubeSchedulerConfiguration at path: with --config, kube-scheduler ignores
// its --kubeconfig flag, and a process outside a cluster has no in-cluster
// configuration to fall back on. In a pod, the chart's config needs neither.
func SetClientKubeconfig(path, kubeconfig string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	conn, _ := cfg["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = conn
	if data, err = yaml.Marshal(cfg); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// WriteServiceAccountKubeconfig writes to path a kubeconfig for the cluster
// of base (a kubeconfig file's path) that authenticates as the
// ServiceAccount namespace/name, with a token from the TokenRequest API
// valid for an hour.
func WriteServiceAccountKubeconfig(ctx context.Context, client kubernetes.Interface, base, namespace, name, path string) error {
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("TokenRequest for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg, err := clientcmd.LoadFromFile(base)
	if err != nil {
		return err
	}
	ctxName := cfg.CurrentContext
	current, ok := cfg.Contexts[ctxName]
	if !ok {
		return fmt.Errorf("%s: no current context", base)
	}
	cluster, ok := cfg.Clusters[current.Cluster]
	if !ok {
		return fmt.Errorf("%s: context %s names no cluster", base, ctxName)
	}
	user := "system:serviceaccount:" + namespace + ":" + name
	out := clientcmdapi.NewConfig()
	out.Clusters["cluster"] = cluster
	out.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	out.Contexts[user] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: user, Namespace: namespace}
	out.CurrentContext = user
	return clientcmd.WriteToFile(*out, path)
}
