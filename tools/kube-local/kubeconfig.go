package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// runKubeconfig writes a kubeconfig holding a bound ServiceAccount token
// (TokenRequest API), for least-privilege tests.
func runKubeconfig(args []string) int {
	fs := flag.NewFlagSet("kubeconfig", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "data directory (required)")
	sa := fs.String("service-account", "", "NAMESPACE/NAME (required); created if missing")
	ttl := fs.Duration("ttl", 24*time.Hour, "token lifetime (>= 10m)")
	out := fs.String("o", "", "output file (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ns, name, ok := strings.Cut(*sa, "/")
	if *dataDir == "" || *out == "" || !ok || ns == "" || name == "" {
		fmt.Fprintln(os.Stderr, "kubeconfig: usage: kube-local kubeconfig --data-dir D --service-account NAMESPACE/NAME [--ttl 24h] -o FILE")
		return 2
	}
	if err := saKubeconfig(layout{dir: *dataDir}, ns, name, *ttl, *out); err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		return 1
	}
	fmt.Println(*out)
	return 0
}

func saKubeconfig(l layout, ns, name string, ttl time.Duration, out string) error {
	admin, err := clientcmd.LoadFromFile(l.AdminKubeconfig())
	if err != nil {
		return err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*admin, nil).ClientConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create serviceaccount %s/%s: %w", ns, name, err)
	}
	secs := int64(ttl.Seconds())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token request for %s/%s: %w", ns, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	user := "system:serviceaccount:" + ns + ":" + name
	cfg.Clusters["kube-local"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["kube-local"] = &clientcmdapi.Context{Cluster: "kube-local", AuthInfo: user, Namespace: ns}
	cfg.CurrentContext = "kube-local"
	return writeKubeconfig(out, cfg)
}
