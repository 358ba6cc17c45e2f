// oci-registry serves an OCI distribution registry (go-containerregistry's, blobs in memory)
// on a loopback address, for the tests of `gpufleet bundle -o oci://...` and `bundle pull`.
// It prints the bound address on stdout, so a test can ask for port 0 and read the port.
// --auth USER:PASS puts the registry behind the token flow of the distribution spec: /v2/
// answers 401 with a Bearer challenge whose realm (/token) trades those credentials (GET with
// Basic) or --refresh-token (POST, grant_type=refresh_token, as docker sends an identity
// token) for a token; --auth-mode basic asks for the credentials themselves on every request.
// --max-request-bytes refuses larger request bodies with 413, as proxies in front of
// registries do, so that only a chunked upload gets a large blob in.
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
	authMode := flag.String("auth-mode", "token", "with --auth: token (Bearer challenge, /token realm) or basic")
	refresh := flag.String("refresh-token", "", "with --auth-mode token: /token also hands out the token for this OAuth2 refresh token (POST)")
	maxBody := flag.Int64("max-request-bytes", 0, "refuse request bodies larger than this with 413 (0: no limit)")
	shortRange := flag.Bool("short-range", false, "answer each chunk (PATCH) with a Range one byte short, as a registry that lost a byte would (tests a client's check)")
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
	if *authMode != "token" && *authMode != "basic" {
		log.Fatalf("--auth-mode %q: use token or basic", *authMode)
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
	switch {
	case *auth != "" && *authMode == "basic":
		handler = withBasic(handler, *auth)
	case *auth != "":
		handler = withToken(handler, *auth, *refresh, *cert != "", l.Addr().String())
	}
	if *maxBody > 0 {
		handler = withMaxBody(handler, *maxBody)
	}
	if *shortRange {
		handler = withShortRange(handler)
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

// withBasic guards every request with HTTP Basic USER:PASS.
func withBasic(next http.Handler, userPass string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user+":"+pass), []byte(userPass)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="oci-registry"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withMaxBody answers 413 for a body over limit bytes (a declared length, or one that turns
// out longer while it is read).
func withMaxBody(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			http.Error(w, fmt.Sprintf(`{"errors":[{"code":"SIZE_INVALID","message":"request body of %d bytes is over the limit of %d"}]}`, r.ContentLength, limit), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		next.ServeHTTP(w, r)
	})
}

// shortRangeWriter rewrites the Range header "0-N" of a response to "0-(N-1)".
type shortRangeWriter struct{ http.ResponseWriter }

func (w shortRangeWriter) WriteHeader(code int) {
	var end int64
	if _, err := fmt.Sscanf(w.Header().Get("Range"), "0-%d", &end); err == nil && end > 0 {
		w.Header().Set("Range", fmt.Sprintf("0-%d", end-1))
	}
	w.ResponseWriter.WriteHeader(code)
}

// withShortRange under-reports what each PATCH stored.
func withShortRange(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			w = shortRangeWriter{w}
		}
		next.ServeHTTP(w, r)
	})
}

// withToken guards /v2/ with one random token, handed out at /token for Basic USER:PASS (GET)
// or for the refresh token (POST form, grant_type=refresh_token).
func withToken(next http.Handler, userPass, refresh string, tls bool, addr string) http.Handler {
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
		if r.URL.Path == "/token" && r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "refresh_token" ||
				refresh == "" || !equal(r.PostForm.Get("refresh_token"), refresh) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"invalid refresh token"}]}`))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": token, "expires_in": 300})
			return
		}
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
