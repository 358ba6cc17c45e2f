// fluxcheck decodes Flux HelmRelease and HelmRepository objects strictly into Flux's own API
// types (github.com/fluxcd/helm-controller/api, github.com/fluxcd/source-controller/api):
// an unknown or misspelt field, a wrong type or a wrong apiVersion is an error. It also checks
// what the CRDs' validation demands of the fields gpufleet writes, and that every dependsOn
// names a HelmRelease of the same set. Used by tests/integration/recipe/bundle_verify.sh,
// because Flux's HelmRelease CRD is not available from the Go module proxy.
//
// Usage: fluxcheck FILE_OR_DIR...
package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"sigs.k8s.io/yaml"
)

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func documents(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, d := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs, nil
}

func files(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		err := filepath.Walk(a, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if !info.IsDir() && strings.HasSuffix(p, ".yaml") {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func main() {
	paths, err := files(os.Args[1:])
	if err != nil || len(paths) == 0 {
		fmt.Fprintln(os.Stderr, "usage: fluxcheck FILE_OR_DIR... (no YAML files found)", err)
		os.Exit(2)
	}
	releases := map[string]*helmv2.HelmRelease{}
	repos := map[string]*sourcev1.HelmRepository{}
	var problems []string
	bad := func(path, format string, args ...any) {
		problems = append(problems, path+": "+fmt.Sprintf(format, args...))
	}
	for _, path := range paths {
		docs, err := documents(path)
		if err != nil {
			bad(path, "%v", err)
			continue
		}
		for _, doc := range docs {
			var h header
			if err := yaml.Unmarshal(doc, &h); err != nil {
				bad(path, "%v", err)
				continue
			}
			switch h.Kind {
			case "HelmRelease":
				var r helmv2.HelmRelease
				if h.APIVersion != helmv2.GroupVersion.String() {
					bad(path, "apiVersion %q, want %q", h.APIVersion, helmv2.GroupVersion.String())
				}
				if err := yaml.UnmarshalStrict(doc, &r); err != nil {
					bad(path, "HelmRelease: %v", err)
					continue
				}
				if r.Spec.Chart == nil || r.Spec.Chart.Spec.Chart == "" || r.Spec.Chart.Spec.Version == "" {
					bad(path, "HelmRelease %s: spec.chart.spec.chart and .version are required", r.Name)
				} else if k := r.Spec.Chart.Spec.SourceRef.Kind; k != "HelmRepository" && k != "GitRepository" && k != "Bucket" {
					bad(path, "HelmRelease %s: sourceRef.kind %q", r.Name, k)
				}
				if r.Spec.Interval.Duration <= 0 {
					bad(path, "HelmRelease %s: spec.interval must be positive", r.Name)
				}
				releases[r.Namespace+"/"+r.Name] = &r
			case "HelmRepository":
				var r sourcev1.HelmRepository
				if h.APIVersion != sourcev1.GroupVersion.String() {
					bad(path, "apiVersion %q, want %q", h.APIVersion, sourcev1.GroupVersion.String())
				}
				if err := yaml.UnmarshalStrict(doc, &r); err != nil {
					bad(path, "HelmRepository: %v", err)
					continue
				}
				oci := strings.HasPrefix(r.Spec.URL, "oci://")
				if oci != (r.Spec.Type == sourcev1.HelmRepositoryTypeOCI) {
					bad(path, "HelmRepository %s: type %q does not fit url %q", r.Name, r.Spec.Type, r.Spec.URL)
				}
				repos[r.Namespace+"/"+r.Name] = &r
			}
		}
	}
	for key, r := range releases {
		for _, d := range r.Spec.DependsOn {
			ns := d.Namespace
			if ns == "" {
				ns = r.Namespace
			}
			if releases[ns+"/"+d.Name] == nil {
				problems = append(problems, fmt.Sprintf("HelmRelease %s depends on %s/%s, which is not in the set", key, ns, d.Name))
			}
		}
		if r.Spec.Chart != nil {
			ref := r.Spec.Chart.Spec.SourceRef
			ns := ref.Namespace
			if ns == "" {
				ns = r.Namespace
			}
			if ref.Kind == "HelmRepository" && repos[ns+"/"+ref.Name] == nil {
				problems = append(problems, fmt.Sprintf("HelmRelease %s: source %s/%s is not in the set", key, ns, ref.Name))
			}
		}
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("fluxcheck: %d HelmReleases and %d HelmRepositories ok\n", len(releases), len(repos))
}
