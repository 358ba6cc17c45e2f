#include "recipe/manifests.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/atomic_file.h"
#include "core/errors.h"
#include "core/file_reader.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/yaml.h"
#include "recipe/tool_process.h"

namespace gpufleet::recipe {

using core::InvalidInput;
using core::Value;

namespace {

// Checks the objects and keeps them, to be re-emitted together: the same objects always give
// the same text, whatever the formatting, comments or tool version that produced them.
void canonical(const std::vector<Value>& docs, const std::string& where, std::vector<Value>& out) {
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const Value& d = docs[i];
    if (d.is_null()) continue;  // empty documents ("---" at the end)
    std::string w = where + " document " + std::to_string(i + 1);
    if (!d.is_map()) throw InvalidInput(w + ": not a Kubernetes object (a mapping)");
    for (std::string_view key : {"apiVersion", "kind"}) {
      const Value* f = d.find(key);
      if (f == nullptr || f->if_string() == nullptr || f->as_string().empty())
        throw InvalidInput(w + ": " + std::string(key) + ": missing; every object names it");
    }
    if (d.get_string({"metadata", "name"}).empty())
      throw InvalidInput(w + ": metadata.name: missing; every object is named");
    out.push_back(d);
  }
}

}  // namespace

std::vector<std::string> kustomize_command() {
  std::vector<std::string> cmd;
  if (const char* env = std::getenv("GPUFLEET_KUBECTL"); env != nullptr && *env != '\0') {
    for (std::string_view part : core::split_trimmed(env, ' ')) {
      if (!part.empty()) cmd.emplace_back(part);
    }
  }
  if (cmd.empty()) cmd.emplace_back("kubectl");
  cmd.emplace_back("kustomize");
  return cmd;
}

ManifestSource render_manifests(const Library& lib, const std::string& component,
                                const std::string& kind, const std::string& path) {
  ManifestSource m;
  m.kind = kind;
  m.path = path;
  const std::string prefix = path + "/";
  const std::string where = "component " + component + " (" + kind + " " + path + ")";
  std::vector<Value> objects;
  if (kind == "manifests") {
    // Every *.yaml file under the directory, in path order.
    for (auto it = lib.manifest_files.lower_bound(prefix);
         it != lib.manifest_files.end() && it->first.rfind(prefix, 0) == 0; ++it) {
      std::vector<Value> docs = core::parse_yaml_documents(it->second, it->first);
      canonical(docs, where + ": " + it->first, objects);
    }
  } else if (kind == "kustomize") {
    // The whole manifests/ tree, so that a kustomization may use sibling bases.
    ToolTempDir tmp("gpufleet-kustomize");
    for (const auto& [file, text] : lib.manifest_files) {
      core::write_file_atomic(tmp.path + "/" + file, text);
    }
    std::vector<std::string> args = kustomize_command();
    args.push_back(tmp.path + "/" + path);
    std::string out = run_tool(args, tmp.path + "/stderr", where,
                               "install kubectl or set GPUFLEET_KUBECTL to one (kube-local's "
                               "built-in kubectl: GPUFLEET_KUBECTL=\"kube-local kubectl\")");
    std::vector<Value> docs = core::parse_yaml_documents(out, where + " kustomize output");
    canonical(docs, where + " kustomize output", objects);
  } else {
    throw InvalidInput(where + ": unknown manifest kind '" + kind +
                       "'; use manifests or kustomize");
  }
  if (objects.empty())
    throw InvalidInput(where + ": renders no object; the directory holds no Kubernetes object");
  m.content = core::to_yaml_documents(objects);
  m.sha256 = core::sha256_hex(m.content);
  return m;
}

}  // namespace gpufleet::recipe
