#include "recipe/oci_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/base64.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/subprocess.h"
#include "core/text.h"
#include "core/value.h"
#include "recipe/tool_process.h"

namespace gpufleet::recipe {
namespace {

constexpr std::string_view kManifestMediaType = "application/vnd.oci.image.manifest.v1+json";
constexpr std::string_view kEmptyMediaType = "application/vnd.oci.empty.v1+json";
constexpr std::string_view kEmptyDigest =
    "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";  // of "{}"
constexpr std::size_t kMaxManifestBytes = std::size_t{4} << 20;

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A repository path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* (distribution spec).
bool valid_component(std::string_view s) {
  if (s.empty() || !is_lower_alnum(s.front()) || !is_lower_alnum(s.back())) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (is_lower_alnum(c) || c == '-') continue;
    if (c == '.' || c == '_') {
      if (c == '_' && i + 1 < s.size() && s[i + 1] == '_') ++i;
      if (i + 1 < s.size() && !is_lower_alnum(s[i + 1])) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool valid_tag(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
              (i > 0 && (c == '.' || c == '-'));
    if (!ok) return false;
  }
  return true;
}

bool valid_digest(std::string_view s) {
  if (s.size() != 71 || s.substr(0, 7) != "sha256:") return false;
  for (char c : s.substr(7))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool valid_registry(std::string_view s) {
  std::string_view host = s, port;
  if (!s.empty() && s.front() == '[') {
    std::size_t close = s.find(']');
    if (close == std::string_view::npos) return false;
    host = s.substr(0, close + 1);
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port = rest.substr(1);
      if (port.empty()) return false;
    }
  } else {
    std::size_t colon = s.rfind(':');
    if (colon != std::string_view::npos) {
      host = s.substr(0, colon);
      port = s.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (host.empty()) return false;
    for (char c : host)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') return false;
  }
  if (port.size() > 5) return false;
  for (char c : port)
    if (c < '0' || c > '9') return false;
  return true;
}

std::string sha256_digest(std::string_view data) { return "sha256:" + core::sha256_hex(data); }

// ---- HTTP over libcurl ----

struct Response {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names, of the last response
  bool truncated = false;
};

struct Transfer {
  Response* r;
  std::size_t max_body;
};

size_t on_body(char* p, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::size_t len = size * n;
  if (t->r->body.size() + len > t->max_body) {
    t->r->truncated = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  t->r->body.append(p, len);
  return len;
}

size_t on_header(char* p, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  std::string_view line(p, size * n);
  // A new status line (after a redirect or a 100 Continue) starts a new set of headers.
  if (line.substr(0, 5) == "HTTP/") t->r->headers.clear();
  std::size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    t->r->headers[name] = std::string(core::trim(line.substr(colon + 1)));
  }
  return size * n;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* s) const { curl_slist_free_all(s); }
};

std::string url_escape(std::string_view s) {
  std::string out;
  static const char* hex = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// `key="value"` parameters of a WWW-Authenticate challenge.
std::map<std::string, std::string> challenge_params(std::string_view text) {
  std::map<std::string, std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    std::size_t eq = text.find('=', i);
    if (eq == std::string_view::npos) break;
    std::string key(core::trim(text.substr(i, eq - i)));
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    i = eq + 1;
    std::string value;
    if (i < text.size() && text[i] == '"') {
      ++i;
      while (i < text.size() && text[i] != '"') {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        value += text[i++];
      }
      ++i;
    } else {
      while (i < text.size() && text[i] != ',') value += text[i++];
    }
    out[key] = std::string(core::trim(value));
  }
  return out;
}

// The message a registry puts in its error body ({"errors":[{"code","message"}]}), or the
// start of the body when it is not that.
std::string registry_message(const std::string& body) {
  try {
    core::Value v = core::parse_json(body);
    if (const core::Value* errs = v.find("errors"); errs != nullptr && errs->is_list()) {
      std::string out;
      for (const core::Value& e : errs->as_list()) {
        if (!out.empty()) out += "; ";
        out += std::string(e.get_string({"code"})) + ": " + std::string(e.get_string({"message"}));
      }
      if (!out.empty()) return out;
    }
  } catch (const std::exception&) {
  }
  std::string s(core::trim(body.substr(0, 200)));
  return s.empty() ? "no message" : s;
}

class Session {
 public:
  Session(const OciReference& ref, const OciOptions& options, std::string_view actions)
      : ref_(ref), options_(options), actions_(actions) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    base_ = std::string(options.plain_http ? "http://" : "https://") + ref.registry;
    std::string config = options.registry_config;
    bool explicit_config = !config.empty();
    if (!explicit_config) config = default_registry_config();
    std::error_code ec;
    // A missing default file means no credentials; a named one is checked by the CLI.
    if (!config.empty() && (explicit_config || std::filesystem::exists(config, ec))) {
      config_ = config;
      try {
        credentials_ = registry_credentials(core::read_file(config), config, ref.registry);
      } catch (const core::InvalidInput& e) {
        throw core::InvalidInput(
            std::string(explicit_config ? "--registry-config: "
                                        : "docker config (give --registry-config FILE to use "
                                          "another): ") +
            e.what());
      }
    }
  }

  std::string url(std::string_view path) const {
    return base_ + "/v2/" + ref_.repository + std::string(path);
  }

  // Absolute URL of a Location header (registries often give a path).
  std::string resolve(const std::string& location) const {
    if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0) return location;
    if (!location.empty() && location.front() == '/') return base_ + location;
    return base_ + "/" + location;
  }

  // One request, authenticated: on a 401 the challenge is answered once and the request
  // repeated.
  Response request(const std::string& method, const std::string& url, const std::string* body,
                   const std::vector<std::string>& headers, std::size_t max_body,
                   std::string_view what) {
    Response r = send(method, url, body, headers, max_body, authorization_, what);
    if (r.status != 401) return r;
    authenticate(r, what);
    return send(method, url, body, headers, max_body, authorization_, what);
  }

  [[noreturn]] void fail(const Response& r, std::string_view what) const {
    std::string msg = "registry " + ref_.registry + ": " + std::string(what) + ": HTTP " +
                      std::to_string(r.status) + " " + registry_message(r.body);
    if (r.status == 401 || r.status == 403) {
      msg += credentials_.empty()
                 ? " (no credentials for " + ref_.registry + " in the docker config" +
                       (config_.empty() ? "" : " " + config_) + "; add them with `docker login " +
                       ref_.registry + "` or give --registry-config FILE)"
                 : " (the credentials for " + ref_.registry + " from " + credentials_.source +
                       " were refused)";
    } else if (r.status == 400 && options_.plain_http) {
      msg += " (if the registry serves HTTPS, drop --registry-plain-http)";
    }
    throw std::runtime_error(msg);
  }

 private:
  void authenticate(const Response& r, std::string_view what) {
    auto it = r.headers.find("www-authenticate");
    std::string challenge = it == r.headers.end() ? "" : it->second;
    std::string scheme = challenge.substr(0, challenge.find(' '));
    for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == "basic") {
      if (credentials_.username.empty()) {
        if (!credentials_.identity_token.empty()) {
          throw std::runtime_error("registry " + ref_.registry + ": " + std::string(what) +
                                   ": the registry asks for a user and password (Basic), but " +
                                   credentials_.source +
                                   " holds only an identity token; log in with a password");
        }
        fail(r, what);
      }
      authorization_ = "Authorization: Basic " + core::base64_encode(basic_pair());
      return;
    }
    if (scheme != "bearer") fail(r, what);
    auto params = challenge_params(std::string_view(challenge).substr(scheme.size()));
    std::string realm = params["realm"];
    if (realm.rfind("https://", 0) != 0 && realm.rfind("http://", 0) != 0) {
      throw std::runtime_error("registry " + ref_.registry + ": " + std::string(what) +
                               ": the Bearer challenge names no http(s) token realm (" +
                               core::quoted(challenge) + ")");
    }
    std::string scope = params.count("scope") != 0
                            ? params["scope"]
                            : "repository:" + ref_.repository + ":" + std::string(actions_);
    std::string token_url = realm + (realm.find('?') == std::string::npos ? "?" : "&");
    if (params.count("service") != 0) token_url += "service=" + url_escape(params["service"]) + "&";
    token_url += "scope=" + url_escape(scope);
    Response t;
    if (!credentials_.identity_token.empty()) {
      // OAuth2 refresh-token grant (the distribution token spec's POST form), as docker does
      // with an identity token.
      std::string form = "grant_type=refresh_token&client_id=gpufleet&refresh_token=" +
                         url_escape(credentials_.identity_token) + "&scope=" + url_escape(scope);
      if (params.count("service") != 0) form += "&service=" + url_escape(params["service"]);
      t = send("POST", realm, &form, {"Content-Type: application/x-www-form-urlencoded"}, 1 << 20,
               "", "token from " + realm);
    } else {
      std::string basic;
      if (!credentials_.username.empty())
        basic = "Authorization: Basic " + core::base64_encode(basic_pair());
      t = send("GET", token_url, nullptr, {}, 1 << 20, basic, "token from " + realm);
    }
    if (t.status != 200) fail(t, "token from " + realm);
    std::string token;
    try {
      core::Value v = core::parse_json(t.body, realm);
      token = std::string(v.get_string({"token"}));
      if (token.empty()) token = std::string(v.get_string({"access_token"}));
    } catch (const std::exception& e) {
      throw std::runtime_error("registry " + ref_.registry + ": token from " + realm +
                               ": not JSON: " + e.what());
    }
    if (token.empty())
      throw std::runtime_error("registry " + ref_.registry + ": token from " + realm +
                               ": the answer holds no token");
    authorization_ = "Authorization: Bearer " + token;
  }

  Response send(const std::string& method, const std::string& url, const std::string* body,
                const std::vector<std::string>& headers, std::size_t max_body,
                const std::string& authorization, std::string_view what) const {
    std::unique_ptr<CURL, CurlDeleter> c(curl_easy_init());
    if (!c) throw std::runtime_error("libcurl: cannot create a handle");
    CURL* e = c.get();
    Response r;
    Transfer t{&r, max_body};
    char err[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, options_.plain_http ? "http,https" : "https");
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, static_cast<long>(options_.timeout.count()));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "gpufleet");
    // Blob GETs may redirect to storage; curl sends our Authorization only to the first host.
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, method == "GET" ? 1L : 0L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    if (!options_.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options_.ca_file.c_str());
    if (method == "HEAD") {
      curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (method != "GET") {
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
      static const std::string empty;
      const std::string& b = body != nullptr ? *body : empty;
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, b.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(b.size()));
    }
    std::unique_ptr<curl_slist, SlistDeleter> list;
    auto add = [&](const std::string& h) {
      curl_slist* n = curl_slist_append(list.get(), h.c_str());
      if (n == nullptr) throw std::bad_alloc();
      (void)list.release();
      list.reset(n);
    };
    add("Expect:");  // no 100-continue round trip before each upload
    for (const std::string& h : headers) add(h);
    if (!authorization.empty()) add(authorization);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list.get());

    CURLcode rc = curl_easy_perform(e);
    if (rc == CURLE_WRITE_ERROR && r.truncated) {
      throw std::runtime_error("registry " + ref_.registry + ": " + std::string(what) +
                               ": the answer is larger than " + std::to_string(max_body) +
                               " bytes");
    }
    if (rc != CURLE_OK) throw transport_error(rc, err, what);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r.status);
    return r;
  }

  std::runtime_error transport_error(CURLcode rc, const char* err, std::string_view what) const {
    std::string detail = err[0] != '\0' ? err : curl_easy_strerror(rc);
    std::string head = "registry " + ref_.registry + ": " + std::string(what) + ": ";
    switch (rc) {
      case CURLE_PEER_FAILED_VERIFICATION:
        return std::runtime_error(head + "the registry's TLS certificate is not trusted (" +
                                  detail +
                                  "); give the CA that signed it with --registry-ca-file CA.pem");
      case CURLE_SSL_CACERT_BADFILE:
        return std::runtime_error(head + "cannot use --registry-ca-file " +
                                  core::quoted(options_.ca_file) + " (" + detail +
                                  "); give a PEM file with the registry's CA certificate");
      case CURLE_SSL_CONNECT_ERROR:
        return std::runtime_error(head + "TLS handshake failed (" + detail +
                                  "); if the registry serves plain HTTP, add "
                                  "--registry-plain-http");
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_CONNECT:
      case CURLE_OPERATION_TIMEDOUT:
      case CURLE_RECV_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_GOT_NOTHING:
        return std::runtime_error(head + "cannot reach " + ref_.registry + " (" + detail +
                                  "); check that the registry runs and the address is right");
      default: return std::runtime_error(head + detail);
    }
  }

  std::string basic_pair() const { return credentials_.username + ":" + credentials_.password; }

  const OciReference& ref_;
  const OciOptions& options_;
  std::string actions_;
  std::string base_;
  std::string config_;
  RegistryCredentials credentials_;
  std::string authorization_;
};

// A blob the registry does not have yet: one PUT when it fits in a chunk, else PATCH chunks
// with Content-Range then a PUT with the digest (each step goes to the Location the
// registry gave last, as the distribution spec requires).
void ensure_blob(Session& s, const std::string& digest, const std::string& data,
                 std::size_t chunk) {
  Response head =
      s.request("HEAD", s.url("/blobs/" + digest), nullptr, {}, 0, "HEAD blob " + digest);
  if (head.status == 200) return;
  if (head.status != 404) s.fail(head, "HEAD blob " + digest);
  Response post =
      s.request("POST", s.url("/blobs/uploads/"), nullptr, {}, 1 << 20, "start an upload");
  if (post.status != 202) s.fail(post, "start an upload (POST blobs/uploads/)");
  auto location = [&](const Response& r, const std::string& step) {
    auto loc = r.headers.find("location");
    if (loc == r.headers.end() || loc->second.empty())
      throw std::runtime_error("registry " + s.url("") + ": " + step +
                               " answered without a Location to send the upload to");
    return s.resolve(loc->second);
  };
  std::string at = location(post, "starting the upload of blob " + digest);
  const std::string* last = &data;
  std::string empty;
  if (chunk > 0 && data.size() > chunk) {
    for (std::size_t off = 0; off < data.size(); off += chunk) {
      const std::size_t n = std::min(chunk, data.size() - off);
      const std::string range = std::to_string(off) + "-" + std::to_string(off + n - 1);
      const std::string what = "upload blob " + digest + " bytes " + range + " of " +
                               std::to_string(data.size()) + " (PATCH)";
      const std::string part = data.substr(off, n);
      Response r = s.request("PATCH", at, &part,
                             {"Content-Type: application/octet-stream", "Content-Range: " + range},
                             1 << 20, what);
      if (r.status != 202) s.fail(r, what);
      // The registry says how much it holds; a short count would end in a wrong digest.
      if (auto got = r.headers.find("range");
          got != r.headers.end() && got->second != "0-" + std::to_string(off + n - 1) &&
          got->second != "bytes=0-" + std::to_string(off + n - 1)) {
        throw std::runtime_error("registry " + s.url("") + ": " + what + ": it holds " +
                                 core::quoted(got->second) + " after the chunk, not 0-" +
                                 std::to_string(off + n - 1));
      }
      at = location(r, what);
    }
    last = &empty;
  }
  at +=
      (at.find('?') == std::string::npos ? "?" : "&") + std::string("digest=") + url_escape(digest);
  Response r = s.request("PUT", at, last, {"Content-Type: application/octet-stream"}, 1 << 20,
                         "upload blob " + digest);
  if (r.status != 201) s.fail(r, "upload blob " + digest);
}

}  // namespace

std::string OciReference::text() const {
  std::string out = "oci://" + registry + "/" + repository;
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

bool is_oci_reference(std::string_view text) { return text.rfind("oci://", 0) == 0; }

OciReference parse_oci_reference(std::string_view text, std::string_view flag, bool allow_digest) {
  const std::string form = allow_digest ? "oci://HOST[:PORT]/REPOSITORY:TAG or "
                                          "oci://HOST[:PORT]/REPOSITORY@sha256:DIGEST"
                                        : "oci://HOST[:PORT]/REPOSITORY:TAG";
  auto bad = [&](const std::string& why) {
    throw core::InvalidInput(std::string(flag) + " " + core::quoted(text) + ": " + why +
                             "; expected " + form +
                             " (e.g. oci://registry.example:5000/"
                             "gpufleet/bundles:v1)");
  };
  if (!is_oci_reference(text)) bad("does not start with oci://");
  std::string_view rest = text.substr(6);
  std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) bad("no repository after the registry");
  OciReference ref;
  ref.registry = std::string(rest.substr(0, slash));
  if (!valid_registry(ref.registry))
    bad("registry " + core::quoted(ref.registry) + " is not HOST or HOST:PORT");
  std::string_view name = rest.substr(slash + 1);
  if (std::size_t at = name.find('@'); at != std::string_view::npos) {
    ref.digest = std::string(name.substr(at + 1));
    name = name.substr(0, at);
    if (!valid_digest(ref.digest))
      bad("digest " + core::quoted(ref.digest) + " is not sha256: and 64 lower-case hex digits");
    if (!allow_digest) bad("a push names a tag, not a digest (the registry computes the digest)");
  }
  std::size_t colon = name.rfind(':');
  if (colon != std::string_view::npos && name.find('/', colon) == std::string_view::npos) {
    ref.tag = std::string(name.substr(colon + 1));
    name = name.substr(0, colon);
    if (!valid_tag(ref.tag))
      bad("tag " + core::quoted(ref.tag) +
          " is not 1-128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')");
  }
  if (name.empty()) bad("no repository after the registry");
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    std::string_view part = name.substr(start, end - start);
    if (!valid_component(part)) {
      bad("repository component " + core::quoted(part) +
          " must be lower-case letters and digits, separated by '.', '_', '__' or '-'");
    }
    start = end + 1;
  }
  ref.repository = std::string(name);
  if (ref.tag.empty() && ref.digest.empty()) bad("no tag");
  return ref;
}

std::string default_registry_config() {
  if (const char* d = std::getenv("DOCKER_CONFIG"); d != nullptr && *d != '\0')
    return std::string(d) + "/config.json";
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0')
    return std::string(h) + "/.docker/config.json";
  return {};
}

namespace {

// host[:port] of a docker config key (docker's own keys carry a scheme and a path:
// https://index.docker.io/v1/).
std::string config_key_host(std::string key) {
  if (std::size_t p = key.find("://"); p != std::string::npos) key = key.substr(p + 3);
  return key.substr(0, key.find('/'));
}

// The map `name` of the config, or nullptr when absent.
const core::Value* config_map(const core::Value& v, std::string_view name, const std::string& where,
                              std::string_view expected) {
  const core::Value* f = v.find(name);
  if (f == nullptr || f->is_null()) return nullptr;
  if (!f->is_map())
    throw core::InvalidInput(where + ": " + std::string(name) + ": expected " +
                             std::string(expected));
  return f;
}

// A string field at `path` (for errors), "" when absent.
std::string config_string(const core::Value& v, std::string_view name, const std::string& path) {
  const core::Value* f = v.find(name);
  if (f == nullptr || f->is_null()) return {};
  if (!f->is_string())
    throw core::InvalidInput(path + ": expected a string, got " + core::quoted(core::to_json(*f)));
  return f->as_string();
}

// `docker-credential-NAME get` with the registry on stdin; `none` when the helper has nothing
// for it (docker's helpers answer "credentials not found ..." on stdout and exit 1).
RegistryCredentials run_credential_helper(const std::string& name, const std::string& entry,
                                          const std::string& registry, std::chrono::seconds timeout,
                                          bool& none) {
  const std::string program = "docker-credential-" + name;
  const std::string head =
      "registry " + registry + ": credential helper " + program + " (" + entry + ")";
  ToolTempDir tmp("gpufleet-credential-helper");
  core::SubprocessOptions o;
  o.timeout = timeout;
  o.max_output = 1u << 20;
  o.keep_tail = false;
  o.stderr_to = core::StderrTo::File;
  o.stderr_file = tmp.path + "/stderr";
  o.stdin_data = registry;
  core::SubprocessResult r = core::run_subprocess({program, "get"}, o);
  if (!r.started) {
    throw CredentialHelperError(head + " cannot be run (" + r.error + "); install " + program +
                                " on PATH, or remove the entry, or give --registry-config FILE "
                                "with other credentials");
  }
  none = r.exit_code == 1 && r.output.find("credentials not found") != std::string::npos;
  if (none) return {};
  if (!r.ok()) {
    std::string said(core::trim(r.output));
    try {
      std::string err(core::trim(core::read_file(o.stderr_file)));
      if (!err.empty()) said += (said.empty() ? "" : "; ") + err;
    } catch (const std::exception&) {
    }
    std::string how = r.timed_out ? "ran longer than " + std::to_string(timeout.count()) + " s"
                      : r.output_overflow ? "wrote more than 1 MiB"
                      : r.signal != 0     ? "killed by signal " + std::to_string(r.signal)
                                          : "exit status " + std::to_string(r.exit_code);
    throw CredentialHelperError(head + " failed (" + how + ")" +
                                (said.empty() ? "" : ": " + core::quoted(said)) +
                                "; check it with `printf " + registry + " | " + program +
                                " get`, or log in again with `docker login " + registry + "`");
  }
  core::Value v;
  try {
    v = core::parse_json(r.output, program);
  } catch (const std::exception&) {
  }
  const core::Value* secret = v.is_map() ? v.find("Secret") : nullptr;
  if (secret == nullptr || !secret->is_string()) {
    throw CredentialHelperError(head + " answered " + core::quoted(core::trim(r.output)) +
                                ", not the protocol's JSON "
                                "{\"ServerURL\": ..., \"Username\": ..., \"Secret\": ...}");
  }
  RegistryCredentials c;
  c.source = entry;
  std::string user = config_string(v, "Username", program + " Username");
  // docker's convention: the Username "<token>" marks the Secret as an identity token.
  if (user == "<token>") {
    c.identity_token = secret->as_string();
  } else {
    c.username = user;
    c.password = secret->as_string();
  }
  return c;
}

}  // namespace

RegistryCredentials registry_credentials(const std::string& config_text, const std::string& where,
                                         const std::string& registry,
                                         std::chrono::seconds helper_timeout) {
  core::Value v = core::parse_json(config_text, where);
  if (!v.is_map())
    throw core::InvalidInput(where + ": expected a JSON object (docker's config.json)");

  std::string helper, entry;
  if (const core::Value* helpers =
          config_map(v, "credHelpers", where, "a map of registry to helper name")) {
    for (const auto& h : helpers->as_map()) {
      if (config_key_host(h.key) != registry) continue;
      helper = config_string(*helpers, h.key, where + ": credHelpers." + h.key);
      entry = "credHelpers[" + core::quoted(h.key) + "] in " + where;
      break;
    }
  }
  if (helper.empty()) {
    helper = config_string(v, "credsStore", where + ": credsStore");
    entry = "credsStore in " + where;
  }
  if (!helper.empty()) {
    // docker runs docker-credential-NAME from PATH: a name is a suffix, never a path.
    const bool plain = std::all_of(helper.begin(), helper.end(), [](char ch) {
      return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '-' || ch == '_' || ch == '.';
    });
    if (!plain || helper.size() > 100 || helper.front() == '.') {
      throw core::InvalidInput(entry + ": helper name " + core::quoted(helper) +
                               " is not a program-name suffix (letters, digits, '-', '_', '.'; "
                               "docker runs docker-credential-NAME from PATH); fix the entry");
    }
    bool none = false;
    RegistryCredentials c = run_credential_helper(helper, entry, registry, helper_timeout, none);
    if (!none) return c;
  }

  const core::Value* auths = config_map(v, "auths", where, "a map of registry to credentials");
  if (auths == nullptr) return {};
  for (const auto& a : auths->as_map()) {
    if (config_key_host(a.key) != registry) continue;
    const std::string path = where + ": auths." + a.key;
    if (!a.value.is_map()) throw core::InvalidInput(path + ": expected a map");
    RegistryCredentials c;
    c.source = "auths[" + core::quoted(a.key) + "] in " + where;
    c.identity_token = config_string(a.value, "identitytoken", path + ".identitytoken");
    if (std::string auth = config_string(a.value, "auth", path + ".auth"); !auth.empty()) {
      std::optional<std::string> decoded = core::base64_decode(auth);
      if (!decoded || decoded->find(':') == std::string::npos) {
        throw core::InvalidInput(path +
                                 ".auth: expected base64 of USER:PASSWORD (as docker login "
                                 "writes it)");
      }
      std::size_t colon = decoded->find(':');
      c.username = decoded->substr(0, colon);
      c.password = decoded->substr(colon + 1);
    } else {
      c.username = config_string(a.value, "username", path + ".username");
      c.password = config_string(a.value, "password", path + ".password");
    }
    if (!c.empty()) return c;
  }
  return {};
}

std::string bundle_manifest(const std::string& layer_digest, std::size_t layer_size,
                            const std::map<std::string, std::string>& annotations) {
  core::Value m = core::Value::map();
  m["schemaVersion"] = 2;
  m["mediaType"] = kManifestMediaType;
  m["artifactType"] = kBundleArtifactType;
  core::Value config = core::Value::map();
  config["mediaType"] = kEmptyMediaType;
  config["digest"] = kEmptyDigest;
  config["size"] = 2;
  config["data"] = "e30=";
  m["config"] = std::move(config);
  core::Value layer = core::Value::map();
  layer["mediaType"] = kBundleLayerMediaType;
  layer["digest"] = layer_digest;
  layer["size"] = static_cast<unsigned long>(layer_size);
  core::Value title = core::Value::map();
  title["org.opencontainers.image.title"] = "bundle.tar.gz";
  layer["annotations"] = std::move(title);
  m["layers"] = core::Value::list();
  m["layers"].push_back(std::move(layer));
  if (!annotations.empty()) {
    core::Value a = core::Value::map();
    for (const auto& [k, v] : annotations) a[k] = v;
    m["annotations"] = std::move(a);
  }
  return core::to_json(m);
}

std::string push_bundle(const OciReference& ref, const std::string& layer,
                        const std::map<std::string, std::string>& annotations,
                        const OciOptions& options) {
  if (ref.tag.empty())
    throw core::InvalidInput("-o " + core::quoted(ref.text()) + ": a push needs a tag");
  Session s(ref, options, "pull,push");
  ensure_blob(s, std::string(kEmptyDigest), "{}", options.chunk_bytes);
  std::string layer_digest = sha256_digest(layer);
  ensure_blob(s, layer_digest, layer, options.chunk_bytes);
  std::string manifest = bundle_manifest(layer_digest, layer.size(), annotations);
  std::string digest = sha256_digest(manifest);
  Response r = s.request("PUT", s.url("/manifests/" + ref.tag), &manifest,
                         {"Content-Type: " + std::string(kManifestMediaType)}, 1 << 20,
                         "PUT manifest " + ref.tag);
  if (r.status != 201) s.fail(r, "PUT manifest " + ref.tag);
  if (auto it = r.headers.find("docker-content-digest");
      it != r.headers.end() && !it->second.empty() && it->second != digest) {
    throw std::runtime_error("registry " + ref.registry + ": stored the manifest as " + it->second +
                             ", not " + digest + " (the bytes sent)");
  }
  return digest;
}

PulledBundle pull_bundle(const OciReference& ref, const OciOptions& options) {
  Session s(ref, options, "pull");
  const std::string name = ref.digest.empty() ? ref.tag : ref.digest;
  const std::string what = "GET manifest " + name;
  Response m = s.request("GET", s.url("/manifests/" + name), nullptr,
                         {"Accept: " + std::string(kManifestMediaType)}, kMaxManifestBytes, what);
  if (m.status == 404) {
    throw std::runtime_error("registry " + ref.registry + ": " + ref.text() + " does not exist (" +
                             registry_message(m.body) + ")");
  }
  if (m.status != 200) s.fail(m, what);
  PulledBundle out;
  out.manifest_digest = sha256_digest(m.body);
  if (!ref.digest.empty() && out.manifest_digest != ref.digest) {
    throw std::runtime_error("registry " + ref.registry + ": the manifest of " + ref.text() +
                             " has digest " + out.manifest_digest + ", not the one asked for");
  }
  if (auto it = m.headers.find("docker-content-digest");
      it != m.headers.end() && valid_digest(it->second) && it->second != out.manifest_digest) {
    throw std::runtime_error("registry " + ref.registry + ": the manifest of " + ref.text() +
                             " has digest " + out.manifest_digest + ", the registry says " +
                             it->second);
  }
  const std::string where = ref.text() + " (manifest " + out.manifest_digest + ")";
  core::Value doc;
  try {
    doc = core::parse_json(m.body, where);
  } catch (const std::exception& e) {
    throw std::runtime_error(where + ": not a JSON manifest: " + e.what());
  }
  if (std::string_view t = doc.get_string({"artifactType"}); t != kBundleArtifactType) {
    throw core::InvalidInput(where + ": not a gpufleet bundle: artifactType is " + core::quoted(t) +
                             ", not " + std::string(kBundleArtifactType) +
                             " (push bundles with gpufleet bundle -o oci://...)");
  }
  const core::Value* layers = doc.find("layers");
  if (layers == nullptr || !layers->is_list() || layers->size() != 1) {
    throw core::InvalidInput(where + ": layers: a gpufleet bundle has exactly one layer");
  }
  const core::Value& layer = (*layers)[0];
  std::string digest(layer.get_string({"digest"}));
  std::string_view media = layer.get_string({"mediaType"});
  const core::Value* size = layer.find("size");
  if (media != kBundleLayerMediaType || !valid_digest(digest) || size == nullptr ||
      !(size->is_int() || size->is_uint())) {
    throw core::InvalidInput(where + ": layers[0]: expected mediaType " +
                             std::string(kBundleLayerMediaType) + ", a sha256 digest and a size");
  }
  std::uint64_t want = size->is_int()
                           ? static_cast<std::uint64_t>(std::max<std::int64_t>(0, size->as_int()))
                           : size->as_uint();
  if (want > options.max_layer_bytes) {
    throw core::InvalidInput(where + ": layers[0].size " + std::to_string(want) +
                             " is over the limit of " + std::to_string(options.max_layer_bytes) +
                             " bytes");
  }
  Response b = s.request("GET", s.url("/blobs/" + digest), nullptr, {},
                         static_cast<std::size_t>(want), "GET blob " + digest);
  if (b.status != 200) s.fail(b, "GET blob " + digest);
  if (b.body.size() != want || sha256_digest(b.body) != digest) {
    throw std::runtime_error("registry " + ref.registry + ": blob " + digest + " of " + ref.text() +
                             " arrived with " + std::to_string(b.body.size()) +
                             " bytes and digest " + sha256_digest(b.body) +
                             ": it does not match the manifest; nothing was unpacked");
  }
  out.layer = std::move(b.body);
  return out;
}

}  // namespace gpufleet::recipe
