// oci-registry serves an OCI distribution registry (go-containerregistry's, blobs in memory)
// on a loopback address, for the tests of `gpufleet bundle -o oci://...` and `bundle pull`.
// It prints the bound address on stdout, so a test can ask for port 0 and read the port.
// --auth USER:PASS puts the registry behind the token flow of the distribution spec: /v2/
// answers 401 with a Bearer challenge whose realm (/token) trades those credentials for a
// token.
package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	cert := flag.String("tls-cert", "", "serve HTTPS with this certificate (PEM)")
	key := flag.String("tls-key", "", "private key (PEM) of --tls-cert")
	auth := flag.String("auth", "", "USER:PASS: require a bearer token obtained with these credentials")
	quiet := flag.Bool("quiet", false, "do not log requests")
	flag.Parse()

	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatalf("--addr %q: %v", *addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		log.Fatalf("--addr %q: only loopback addresses are served (e.g. 127.0.0.1:0)", *addr)
	}
	if (*cert == "") != (*key == "") {
		log.Fatal("--tls-cert and --tls-key go together")
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}

	logger := log.New(os.Stderr, "", log.LstdFlags)
	if *quiet {
		logger = log.New(io.Discard, "", 0)
	}
	var handler http.Handler = registry.New(registry.Logger(logger))
	if *auth != "" {
		handler = withToken(handler, *auth, *cert != "", l.Addr().String())
	}

	fmt.Println(l.Addr().String())
	os.Stdout.Sync()
	if *cert != "" {
		err = http.ServeTLS(l, handler, *cert, *key)
	} else {
		err = http.Serve(l, handler)
	}
	log.Fatal(err)
}

// withToken guards /v2/ with one random token, handed out at /token for Basic USER:PASS.
func withToken(next http.Handler, userPass string, tls bool, addr string) http.Handler {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		log.Fatal(err)
	}
	token := hex.EncodeToString(raw)
	scheme := "http"
	if tls {
		scheme = "https"
	}
	realm := scheme + "://" + addr + "/token"
	equal := func(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			user, pass, ok := r.BasicAuth()
			if !ok || !equal(user+":"+pass, userPass) {
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`, http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"token": token})
			return
		}
		if !equal(r.Header.Get("Authorization"), "Bearer "+token) {
			scope := ""
			if parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v2/"), "/"); len(parts) > 2 {
				scope = fmt.Sprintf(`,scope="repository:%s:pull,push"`, strings.Join(parts[:len(parts)-2], "/"))
			}
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="oci-registry"%s`, realm, scope))
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
