#include "kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/base64.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/yaml.h"

namespace gpufleet::kube {

namespace fs = std::filesystem;
using core::InvalidInput;
using core::Value;

namespace {

std::string read_file(const std::string& path, const std::string& what) {
  try {
    return core::read_file(path);
  } catch (const InvalidInput& e) {
    throw InvalidInput(what + ": cannot read file " + e.what());
  }
}

std::string resolve(const std::string& dir, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute() || dir.empty()) return path;
  return (fs::path(dir) / path).string();
}

// One named entry of a kubeconfig list (cluster, user or context) and the directory of the
// file that defined it (relative paths in it resolve there).
struct Entry {
  const Value* body = nullptr;
  std::string dir;
  std::string file;
};

struct Merged {
  std::map<std::string, Entry> clusters, users, contexts;
  std::string current_context;
  std::string current_context_file;
};

const Value* field(const Value& m, std::string_view key) { return m.find(key); }

std::string string_field(const Value& m, std::string_view key, const std::string& where) {
  const Value* v = field(m, key);
  if (v == nullptr || v->is_null()) return {};
  if (!v->is_string()) {
    throw InvalidInput(where + "." + std::string(key) + ": expected a string, found " +
                       std::string(core::kind_name(v->kind())));
  }
  return v->as_string();
}

std::string decode_data(const Value& m, std::string_view key, const std::string& where) {
  std::string text = string_field(m, key, where);
  if (text.empty()) return {};
  std::string compact;
  for (char c : text) {
    if (c != '\n' && c != '\r' && c != ' ') compact += c;
  }
  auto decoded = core::base64_decode(compact);
  if (!decoded) {
    throw InvalidInput(where + "." + std::string(key) +
                       ": not valid base64; it must hold the base64 of the PEM file");
  }
  return *decoded;
}

void collect(const Value& doc, const std::string& file, const std::string& dir, Merged& out) {
  if (!doc.is_map()) {
    if (doc.is_null()) return;  // an empty file contributes nothing, as with kubectl
    throw InvalidInput(file + ": a kubeconfig must be a mapping with clusters, users, contexts");
  }
  auto take = [&](std::string_view list_key, std::string_view body_key,
                  std::map<std::string, Entry>& into) {
    const Value* list = doc.find(list_key);
    if (list == nullptr || list->is_null()) return;
    if (!list->is_list()) {
      throw InvalidInput(file + ": " + std::string(list_key) + " must be a list");
    }
    std::size_t i = 0;
    for (const Value& item : list->as_list()) {
      std::string where = file + ": " + std::string(list_key) + "[" + std::to_string(i++) + "]";
      std::string name = item.is_map() ? string_field(item, "name", where) : std::string();
      if (name.empty()) throw InvalidInput(where + ".name: missing; every entry needs a name");
      const Value* body = item.find(body_key);
      if (body == nullptr || !body->is_map()) {
        throw InvalidInput(where + "." + std::string(body_key) + ": missing or not a mapping");
      }
      // kubectl's merge rule: the first file to define a name wins.
      into.try_emplace(name, Entry{body, dir, file});
    }
  };
  take("clusters", "cluster", out.clusters);
  take("users", "user", out.users);
  take("contexts", "context", out.contexts);
  if (out.current_context.empty()) {
    out.current_context = string_field(doc, "current-context", file);
    out.current_context_file = file;
  }
}

ExecConfig parse_exec(const Value& e, const std::string& where, const std::string& dir) {
  ExecConfig x;
  x.api_version = string_field(e, "apiVersion", where);
  if (x.api_version != "client.authentication.k8s.io/v1" &&
      x.api_version != "client.authentication.k8s.io/v1beta1") {
    throw InvalidInput(where + ".apiVersion: \"" + x.api_version +
                       "\" is not supported; use client.authentication.k8s.io/v1");
  }
  x.command = string_field(e, "command", where);
  if (x.command.empty()) throw InvalidInput(where + ".command: missing; name the plugin binary");
  if (const Value* args = e.find("args"); args && args->is_list()) {
    for (const Value& a : args->as_list()) {
      if (!a.is_string()) throw InvalidInput(where + ".args: every argument must be a string");
      x.args.push_back(a.as_string());
    }
  }
  if (const Value* env = e.find("env"); env && env->is_list()) {
    for (const Value& kv : env->as_list()) {
      x.env.emplace_back(string_field(kv, "name", where + ".env"),
                         string_field(kv, "value", where + ".env"));
    }
  }
  x.install_hint = string_field(e, "installHint", where);
  if (const Value* pci = e.find("provideClusterInfo"); pci && pci->is_bool()) {
    x.provide_cluster_info = pci->as_bool();
  }
  x.working_dir = dir;
  return x;
}

ClientConfig build(const Merged& m, std::string_view context_override,
                   const std::string& description) {
  std::string ctx_name =
      context_override.empty() ? m.current_context : std::string(context_override);
  if (ctx_name.empty()) {
    throw InvalidInput(description +
                       ": no current-context is set; pass --context or run "
                       "`kubectl config use-context NAME`");
  }
  auto ctx = m.contexts.find(ctx_name);
  if (ctx == m.contexts.end()) {
    std::string known;
    for (const auto& [name, e] : m.contexts) known += (known.empty() ? "" : ", ") + name;
    throw InvalidInput(description + ": context \"" + ctx_name +
                       "\" not found (contexts: " + (known.empty() ? "none" : known) + ")");
  }
  const std::string cwhere = ctx->second.file + ": contexts[" + ctx_name + "].context";
  const Value& cbody = *ctx->second.body;
  std::string cluster_name = string_field(cbody, "cluster", cwhere);
  std::string user_name = string_field(cbody, "user", cwhere);

  ClientConfig cfg;
  cfg.source = description + " context " + ctx_name;
  if (std::string ns = string_field(cbody, "namespace", cwhere); !ns.empty()) cfg.namespace_ = ns;

  auto cl = m.clusters.find(cluster_name);
  if (cl == m.clusters.end()) {
    throw InvalidInput(cwhere + ".cluster: cluster \"" + cluster_name + "\" is not defined");
  }
  const Value& cluster = *cl->second.body;
  const std::string clwhere = cl->second.file + ": clusters[" + cluster_name + "].cluster";
  cfg.server = string_field(cluster, "server", clwhere);
  while (cfg.server.ends_with('/')) cfg.server.pop_back();
  if (cfg.server.empty()) throw InvalidInput(clwhere + ".server: missing; set the API server URL");
  if (const Value* insecure = cluster.find("insecure-skip-tls-verify");
      insecure && insecure->is_bool() && insecure->as_bool()) {
    throw InvalidInput(clwhere +
                       ".insecure-skip-tls-verify: true is refused; gpufleet always verifies the "
                       "API server's certificate. Set certificate-authority-data instead.");
  }
  cfg.ca_pem = decode_data(cluster, "certificate-authority-data", clwhere);
  if (cfg.ca_pem.empty()) {
    std::string ca_file = string_field(cluster, "certificate-authority", clwhere);
    if (!ca_file.empty()) {
      cfg.ca_pem = read_file(resolve(cl->second.dir, ca_file), clwhere + ".certificate-authority");
    }
  }
  cfg.tls_server_name = string_field(cluster, "tls-server-name", clwhere);

  if (user_name.empty()) return cfg;  // anonymous
  auto us = m.users.find(user_name);
  if (us == m.users.end()) {
    throw InvalidInput(cwhere + ".user: user \"" + user_name + "\" is not defined");
  }
  const Value& user = *us->second.body;
  const std::string uwhere = us->second.file + ": users[" + user_name + "].user";
  const std::string& udir = us->second.dir;
  cfg.client_cert_pem = decode_data(user, "client-certificate-data", uwhere);
  if (cfg.client_cert_pem.empty()) {
    if (auto f = string_field(user, "client-certificate", uwhere); !f.empty()) {
      cfg.client_cert_pem = read_file(resolve(udir, f), uwhere + ".client-certificate");
    }
  }
  cfg.client_key_pem = decode_data(user, "client-key-data", uwhere);
  if (cfg.client_key_pem.empty()) {
    if (auto f = string_field(user, "client-key", uwhere); !f.empty()) {
      cfg.client_key_pem = read_file(resolve(udir, f), uwhere + ".client-key");
    }
  }
  if (cfg.client_cert_pem.empty() != cfg.client_key_pem.empty()) {
    throw InvalidInput(uwhere +
                       ": a client certificate needs its key and a key its certificate; "
                       "set both client-certificate(-data) and client-key(-data)");
  }
  cfg.token = string_field(user, "token", uwhere);
  if (auto f = string_field(user, "tokenFile", uwhere); !f.empty() && cfg.token.empty()) {
    cfg.token_file = resolve(udir, f);
  }
  if (const Value* exec = user.find("exec"); exec && exec->is_map()) {
    cfg.exec = parse_exec(*exec, uwhere + ".exec", udir);
  }
  if (user.find("username") || user.find("password")) {
    throw InvalidInput(uwhere +
                       ": basic authentication (username/password) is not supported; "
                       "use a client certificate, a token or an exec plugin");
  }
  if (const Value* ap = user.find("auth-provider"); ap && !ap->is_null()) {
    throw InvalidInput(uwhere +
                       ".auth-provider: legacy auth providers are not supported; use an "
                       "exec credential plugin (client.authentication.k8s.io/v1)");
  }
  return cfg;
}

std::vector<std::string> default_paths() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("KUBECONFIG"); env && *env) {
    std::string_view s(env);
    while (!s.empty()) {
      std::size_t colon = s.find(':');
      std::string_view p = s.substr(0, colon);
      if (!p.empty()) paths.emplace_back(p);
      s = colon == std::string_view::npos ? std::string_view{} : s.substr(colon + 1);
    }
    return paths;
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    paths.push_back(std::string(home) + "/.kube/config");
  }
  return paths;
}

std::string directory_of(const std::string& path) {
  fs::path p = fs::absolute(fs::path(path));
  return p.parent_path().string();
}

}  // namespace

ClientConfig load_kubeconfig_text(std::string_view text, std::string_view source_name,
                                  std::string_view dir, std::string_view context) {
  Value doc = core::parse_yaml(text, source_name);
  Merged m;
  collect(doc, std::string(source_name), std::string(dir), m);
  return build(m, context, "kubeconfig " + std::string(source_name));
}

ClientConfig load_kubeconfig(const KubeconfigOptions& options) {
  std::vector<std::string> paths = options.paths.empty() ? default_paths() : options.paths;
  if (paths.empty()) {
    throw InvalidInput("no kubeconfig: set KUBECONFIG or --kubeconfig, or create ~/.kube/config");
  }
  std::vector<Value> docs;
  docs.reserve(paths.size());  // Entries point into these documents.
  Merged m;
  std::string description;
  bool any = false;
  for (const std::string& path : paths) {
    std::error_code ec;
    // kubectl skips KUBECONFIG entries that do not exist; an explicit single path must exist.
    if (options.paths.empty() && paths.size() > 1 && !fs::exists(path, ec)) continue;
    std::string text = read_file(path, "kubeconfig");
    docs.push_back(core::parse_yaml(text, path));
    collect(docs.back(), path, directory_of(path), m);
    description += (description.empty() ? "" : ":") + path;
    any = true;
  }
  if (!any) throw InvalidInput("kubeconfig: none of the files in KUBECONFIG exists");
  return build(m, options.context, "kubeconfig " + description);
}

ClientConfig in_cluster_config(std::string_view root) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || !*host || !*port) {
    throw InvalidInput(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set; "
        "not running in a pod? Pass --kubeconfig instead");
  }
  std::string r(root);
  ClientConfig cfg;
  std::string h(host);
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6 literal
  cfg.server = "https://" + h + ":" + port;
  cfg.token_file = r + "/token";
  // Read once now so that a missing token fails at start-up, not on the first request.
  (void)read_file(cfg.token_file, "in-cluster service account token");
  cfg.ca_pem = read_file(r + "/ca.crt", "in-cluster CA certificate");
  std::error_code ec;
  if (fs::exists(r + "/namespace", ec)) {
    std::string ns = read_file(r + "/namespace", "in-cluster namespace");
    while (!ns.empty() && (ns.back() == '\n' || ns.back() == ' ')) ns.pop_back();
    if (!ns.empty()) cfg.namespace_ = ns;
  }
  cfg.source = "in-cluster service account (" + r + ")";
  return cfg;
}

ClientConfig load_default_config(std::string_view kubeconfig_path, std::string_view context) {
  if (!kubeconfig_path.empty()) {
    return load_kubeconfig({{std::string(kubeconfig_path)}, std::string(context)});
  }
  std::vector<std::string> paths = default_paths();
  std::error_code ec;
  bool any = false;
  for (const auto& p : paths) any = any || fs::exists(p, ec);
  if (!any && std::getenv("KUBERNETES_SERVICE_HOST") != nullptr) return in_cluster_config();
  return load_kubeconfig({{}, std::string(context)});
}

}  // namespace gpufleet::kube
