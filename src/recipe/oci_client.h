// Bundles in OCI registries: `gpufleet bundle -o oci://HOST[:PORT]/REPO:TAG` pushes the
// bundle as an OCI artifact (one tar+gzip layer, the empty config, an image manifest with
// artifactType application/vnd.gpufleet.bundle.v1), `gpufleet bundle pull` fetches it back
// and checks every digest. The distribution spec's push and pull flows over libcurl (kept
// out of this header): HEAD blob, POST + PUT monolithic upload (or POST, PATCH chunks with
// Content-Range, PUT with the digest for blobs over the chunk threshold), PUT manifest; GET
// manifest and blob. Auth: credentials from a docker config.json (auths, credHelpers,
// credsStore), used as Basic or traded for a token when the registry answers with a Bearer
// challenge (WWW-Authenticate): GET with Basic credentials, or POST with an identity token.
#pragma once

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpufleet::recipe {

inline constexpr std::string_view kBundleArtifactType = "application/vnd.gpufleet.bundle.v1";
inline constexpr std::string_view kBundleLayerMediaType =
    "application/vnd.gpufleet.bundle.layer.v1.tar+gzip";

// oci://HOST[:PORT]/REPO[:TAG][@sha256:HEX]
struct OciReference {
  std::string registry;    // host[:port]
  std::string repository;  // path components, lower case
  std::string tag;         // may be empty when digest is set
  std::string digest;      // "sha256:<64 hex>" or empty
  // oci://registry/repository then :tag and/or @digest.
  std::string text() const;
};

bool is_oci_reference(std::string_view text);

// Throws core::InvalidInput naming `flag`, the value and the expected form. A tag is
// required unless `allow_digest` and a digest is given (push needs a tag; pull takes either).
OciReference parse_oci_reference(std::string_view text, std::string_view flag, bool allow_digest);

struct OciOptions {
  bool plain_http = false;      // http:// instead of https:// (loopback or lab registries)
  std::string ca_file;          // PEM CA bundle trusted instead of the system's
  std::string registry_config;  // docker config.json; empty: $DOCKER_CONFIG or ~/.docker
  std::chrono::seconds timeout{300};
  std::size_t max_layer_bytes = std::size_t{2} << 30;
  // Blobs larger than this go up in chunks of this size (POST, PATCH with Content-Range, PUT
  // with the digest), smaller ones in one PUT: registries and proxies in front of them often
  // cap the size of one request.
  std::size_t chunk_bytes = std::size_t{8} << 20;
};

// The default docker config.json path ($DOCKER_CONFIG/config.json, else
// $HOME/.docker/config.json); empty when neither variable is set.
std::string default_registry_config();

// Credentials for one registry, and where they came from (errors name it).
struct RegistryCredentials {
  std::string username;
  std::string password;
  // An OAuth2 refresh token ("identitytoken" in auths, or a helper's Secret under the
  // Username "<token>"): traded at the Bearer realm by a POST with grant_type=refresh_token.
  std::string identity_token;
  std::string source;  // e.g. `credHelpers["reg.example"] (docker-credential-ecr) in FILE`
  [[nodiscard]] bool empty() const {
    return username.empty() && password.empty() && identity_token.empty();
  }
};

// A credential helper named by a config that is missing, fails, times out or answers no JSON:
// the environment's fault, not the file's (a std::runtime_error, not core::InvalidInput).
class CredentialHelperError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The credentials for `registry` in a docker config.json text (read from `where`), resolved as
// docker does: the helper of credHelpers[registry], else the credsStore helper (run as
// `docker-credential-NAME get` with the registry on stdin, {"Username","Secret"} JSON on
// stdout; a helper that has none for it falls back to auths), else auths[registry] ("auth"
// base64 USER:PASSWORD, "username"/"password", "identitytoken"). Keys match host[:port] with
// or without a scheme and a path. Empty when none. Throws core::InvalidInput naming `where`
// and the field for a malformed file (a helper name that is not a plain program-name suffix
// among them: it must never name a path); CredentialHelperError naming the registry, the
// helper, the entry and the fix for a helper that is missing, fails or answers no JSON.
RegistryCredentials registry_credentials(
    const std::string& config_text, const std::string& where, const std::string& registry,
    std::chrono::seconds helper_timeout = std::chrono::seconds(30));

// The manifest for one layer with the given digest and size, byte for byte the same for
// the same arguments (keys sorted, no timestamps).
std::string bundle_manifest(const std::string& layer_digest, std::size_t layer_size,
                            const std::map<std::string, std::string>& annotations);

// Pushes `layer` (the bundle's tar+gzip) and its manifest under ref's tag; returns the
// manifest's digest ("sha256:..."). Throws std::runtime_error naming the registry for
// network, TLS, auth and registry errors.
std::string push_bundle(const OciReference& ref, const std::string& layer,
                        const std::map<std::string, std::string>& annotations,
                        const OciOptions& options);

struct PulledBundle {
  std::string manifest_digest;
  std::string layer;  // checked against the manifest's digest and size
};

// Fetches the manifest (checked against ref's digest when given), checks it is a gpufleet
// bundle, fetches its layer and checks its digest and size.
PulledBundle pull_bundle(const OciReference& ref, const OciOptions& options);

}  // namespace gpufleet::recipe
