package realnode

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certSpec is one certificate the CA signs.
type certSpec struct {
	file   string // pki/<file>.crt and .key
	cn     string
	orgs   []string
	server bool
	ips    []string
	dns    []string
}

// clientIdentities are the clients that get a kubeconfig: the admin, the
// controller manager, the default scheduler and the kubelet, each with the
// identity the API server's RBAC (and the Node authorizer) expects.
var clientIdentities = []certSpec{
	{file: "admin", cn: "budgetguard-e2e-admin", orgs: []string{"system:masters"}},
	{file: "kube-controller-manager", cn: "system:kube-controller-manager"},
	{file: "kube-scheduler", cn: "system:kube-scheduler"},
	{file: "kubelet", cn: "system:node:" + NodeName, orgs: []string{"system:nodes"}},
	{file: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
}

// writePKI writes the run's CA, kube-apiserver's serving certificate, a
// client certificate and kubeconfig for each of clientIdentities, and the
// service-account signing key, all under RunDir/pki.
func writePKI(l Layout) error {
	dir := filepath.Join(l.RunDir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "budgetguard-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCertAndKey(l.pki("ca"), caDER, caKey); err != nil {
		return err
	}
	specs := append([]certSpec{{
		file: "apiserver", cn: "kube-apiserver", server: true,
		ips: []string{NodeIP, KubernetesIP, "127.0.0.1"},
		dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
	}}, clientIdentities...)
	for i, s := range specs {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)),
			Subject:      pkix.Name{CommonName: s.cn, Organization: s.orgs},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(7 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			DNSNames:     s.dns,
		}
		if s.server {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}
		for _, ip := range s.ips {
			tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writeCertAndKey(l.pki(s.file), der, key); err != nil {
			return err
		}
		if s.server {
			continue
		}
		if err := writeKubeconfig(l, s.file); err != nil {
			return err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.pki("sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(l.pki("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600)
}

func writeCertAndKey(base string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(base+".crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(base+".key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// kubeconfigPath is the kubeconfig of one of clientIdentities.
func (l Layout) kubeconfigPath(file string) string {
	if file == "admin" {
		return l.AdminKubeconfig()
	}
	return filepath.Join(l.RunDir, file+".kubeconfig")
}

func writeKubeconfig(l Layout, file string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e-node"] = &clientcmdapi.Cluster{Server: APIServerURL(), CertificateAuthority: l.pki("ca.crt")}
	cfg.AuthInfos[file] = &clientcmdapi.AuthInfo{ClientCertificate: l.pki(file + ".crt"), ClientKey: l.pki(file + ".key")}
	cfg.Contexts["e2e-node"] = &clientcmdapi.Context{Cluster: "e2e-node", AuthInfo: file}
	cfg.CurrentContext = "e2e-node"
	if err := clientcmd.WriteToFile(*cfg, l.kubeconfigPath(file)); err != nil {
		return fmt.Errorf("write the kubeconfig of %s: %w", file, err)
	}
	return nil
}
