package controlplane

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes an admin kubeconfig with every credential inline, so
// that the file alone is enough for kubectl and for any client-go program.
func writeKubeconfig(path, server string, keys pki) error {
	read := func(p string) ([]byte, error) {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("controlplane: kubeconfig: %w", err)
		}
		return data, nil
	}
	ca, err := read(keys.caCert())
	if err != nil {
		return err
	}
	cert, err := read(keys.adminCert())
	if err != nil {
		return err
	}
	key, err := read(keys.adminKey())
	if err != nil {
		return err
	}
	const name = "knit-local"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("controlplane: kubeconfig: %w", err)
	}
	return os.Chmod(path, 0o600)
}
