// docs_reference: generates docs/reference/crds.md (every field of every gpufleet CRD) and
// docs/reference/cli.md (the --help of every gpufleet command), or checks that the committed
// files are what it would generate, so an undocumented field or flag fails CI.
//
//   docs_reference --write DIR --crds deploy/crds --gpufleet build/asan/bin/gpufleet
//   docs_reference --check DIR --crds deploy/crds --gpufleet build/asan/bin/gpufleet
//
// The output depends only on the CRD files and the binary's help text: no paths, no times.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/file_reader.h"
#include "core/json.h"
#include "core/subprocess.h"
#include "core/value.h"
#include "core/yaml.h"

namespace {

namespace fs = std::filesystem;
using gpufleet::core::Value;

constexpr std::string_view kRegenerate = "scripts/update-docs-reference.sh";

// One line of a Markdown table cell: no newlines, pipes escaped; outside code spans `<` is
// written as an entity, so that "<name>" shows instead of being read as an HTML tag.
std::string cell(std::string_view text, bool in_code = false) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    if (c == '|') out += '\\';
    if (c == '<' && !in_code) {
      out += "&lt;";
      continue;
    }
    out += c;
  }
  return out;
}

std::string code(std::string_view text) {
  std::string c = cell(text, true);
  if (c.empty()) return "";
  return c.find('`') == std::string::npos ? "`" + c + "`" : "`` " + c + " ``";
}

// A scalar as YAML would show it (for enums, defaults and bounds).
std::string scalar(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string s = gpufleet::core::to_json(v);
  return s;
}

std::string str(const Value& schema, std::string_view key) {
  const Value* v = schema.find(key);
  return v != nullptr && v->is_string() ? v->as_string() : std::string();
}

bool flag(const Value& schema, std::string_view key) {
  const Value* v = schema.find(key);
  return v != nullptr && v->is_bool() && v->as_bool();
}

std::string type_of(const Value& schema) {
  if (flag(schema, "x-kubernetes-int-or-string")) return "int-or-string";
  std::string t = str(schema, "type");
  if (t == "array") {
    const Value* items = schema.find("items");
    return "[]" + (items != nullptr ? type_of(*items) : std::string("any"));
  }
  if (t == "object" || t.empty()) {
    const Value* ap = schema.find("additionalProperties");
    if (ap != nullptr && ap->is_map()) return "map[string]" + type_of(*ap);
    if (flag(schema, "x-kubernetes-preserve-unknown-fields")) return "object (any fields)";
    if (t.empty()) return "any";
  }
  std::string f = str(schema, "format");
  return f.empty() ? t : t + " (" + f + ")";
}

// The validation facts of one schema node (not of its children).
std::vector<std::string> facts_of(const Value& schema) {
  std::vector<std::string> out;
  if (const Value* e = schema.find("enum"); e != nullptr && e->is_list()) {
    std::string s = "one of ";
    bool first = true;
    for (const Value& v : e->as_list()) {
      s += (first ? "" : ", ") + code(scalar(v).empty() ? "\"\"" : scalar(v));
      first = false;
    }
    out.push_back(s);
  }
  static const std::vector<std::pair<std::string_view, std::string_view>> bounds = {
      {"minimum", "min"},
      {"maximum", "max"},
      {"exclusiveMinimum", "> min"},
      {"exclusiveMaximum", "< max"},
      {"minLength", "min length"},
      {"maxLength", "max length"},
      {"minItems", "min items"},
      {"maxItems", "max items"},
      {"minProperties", "min keys"},
      {"maxProperties", "max keys"},
  };
  for (const auto& [key, name] : bounds)
    if (const Value* v = schema.find(key); v != nullptr && !v->is_map() && !v->is_list())
      out.push_back(std::string(name) + " " + scalar(*v));
  if (std::string p = str(schema, "pattern"); !p.empty()) out.push_back("pattern " + code(p));
  if (std::string lt = str(schema, "x-kubernetes-list-type"); !lt.empty()) {
    std::string s = "list type " + lt;
    if (const Value* keys = schema.find("x-kubernetes-list-map-keys");
        keys != nullptr && keys->is_list()) {
      s += " (keys";
      for (const Value& k : keys->as_list()) s += " " + scalar(k);
      s += ")";
    }
    out.push_back(s);
  }
  if (const Value* rules = schema.find("x-kubernetes-validations");
      rules != nullptr && rules->is_list()) {
    for (const Value& r : rules->as_list()) {
      std::string m = str(r, "message");
      out.push_back("rule: " + (m.empty() ? code(str(r, "rule")) : cell(m)));
    }
  }
  return out;
}

struct Row {
  std::string path, type, required, default_, facts, description;
};

void walk(const Value& schema, const std::string& path, bool required, std::vector<Row>& rows) {
  Row row;
  row.path = path;
  row.type = type_of(schema);
  row.required = required ? "yes" : "";
  if (const Value* d = schema.find("default"); d != nullptr) row.default_ = code(scalar(*d));
  std::vector<std::string> facts = facts_of(schema);
  // An array of scalars or a map of scalars: its element's facts belong on its row.
  const Value* items = schema.find("items");
  const Value* ap = schema.find("additionalProperties");
  const Value* elem = items != nullptr && items->is_map() ? items
                      : ap != nullptr && ap->is_map()     ? ap
                                                          : nullptr;
  bool elem_has_fields = elem != nullptr && (elem->find("properties") != nullptr ||
                                             elem->find("additionalProperties") != nullptr ||
                                             elem->find("items") != nullptr);
  if (elem != nullptr && !elem_has_fields) {
    for (const std::string& f : facts_of(*elem)) facts.push_back("each: " + f);
  }
  for (std::size_t i = 0; i < facts.size(); ++i) row.facts += (i ? "; " : "") + facts[i];
  std::string desc = str(schema, "description");
  if (desc.empty() && elem != nullptr) desc = str(*elem, "description");
  row.description = cell(desc);
  rows.push_back(std::move(row));

  std::set<std::string> req;
  if (const Value* r = schema.find("required"); r != nullptr && r->is_list())
    for (const Value& k : r->as_list())
      if (k.is_string()) req.insert(k.as_string());
  if (const Value* props = schema.find("properties"); props != nullptr && props->is_map())
    for (const auto& entry : props->as_map())
      walk(entry.value, path + "." + entry.key, req.count(entry.key) != 0, rows);
  if (elem_has_fields) {
    std::string child = path + (elem == items ? "[]" : ".*");
    // The element's own row only when it says something its parent's row does not.
    std::vector<Row> sub;
    walk(*elem, child, false, sub);
    if (!sub.empty() && sub.front().facts.empty() && sub.front().default_.empty() &&
        (sub.front().description.empty() || elem == items ||
         sub.front().description == rows.back().description))
      sub.erase(sub.begin());
    for (Row& r : sub) rows.push_back(std::move(r));
  }
}

std::string crd_markdown(const std::vector<fs::path>& files) {
  std::ostringstream md;
  md << "# CRD reference\n\n"
     << "Generated from `deploy/crds/*.yaml` by `" << kRegenerate
     << "`; do not edit by hand (the `docs_reference` test fails when this file is stale).\n"
     << "Every field under `spec` and `status`, recursively: `a.b[]` is an element of the list "
        "`a.b`, `a.b.*` a value of the map `a.b`. Validation lists the schema's facts "
        "(enum, bounds, pattern, list type) and the message of each CEL rule "
        "(`x-kubernetes-validations`) the API server enforces on that field.\n";
  struct Kind {
    std::string name, file;
    Value crd;
  };
  std::vector<Kind> kinds;
  for (const fs::path& f : files) {
    Value crd = gpufleet::core::parse_yaml(gpufleet::core::read_file(f.string()), f.string());
    kinds.push_back({std::string(crd.get_string({"spec", "names", "kind"})), f.filename().string(),
                     std::move(crd)});
  }
  std::sort(kinds.begin(), kinds.end(),
            [](const Kind& a, const Kind& b) { return a.name < b.name; });
  md << "\n";
  for (const Kind& k : kinds) {
    std::string anchor = k.name;
    std::transform(anchor.begin(), anchor.end(), anchor.begin(), ::tolower);
    md << "- [" << k.name << "](#" << anchor << ")\n";
  }
  for (const Kind& k : kinds) {
    const Value& spec = *k.crd.find("spec");
    md << "\n## " << k.name << "\n\n";
    md << "`deploy/crds/" << k.file << "` · group `" << spec.get_string({"group"}) << "` · scope "
       << spec.get_string({"scope"}) << " · plural `" << spec.get_string({"names", "plural"})
       << "`";
    if (const Value* sn = spec.get({"names", "shortNames"}); sn != nullptr && sn->is_list()) {
      md << " · short names";
      for (const Value& s : sn->as_list()) md << " `" << scalar(s) << "`";
    }
    md << "\n";
    const Value* versions = spec.find("versions");
    if (versions == nullptr || !versions->is_list()) continue;
    for (const Value& v : versions->as_list()) {
      md << "\n### " << k.name << " " << v.get_string({"name"}) << "\n";
      const Value* root = v.get({"schema", "openAPIV3Schema"});
      if (root == nullptr) continue;
      if (std::string d = str(*root, "description"); !d.empty()) md << "\n" << cell(d) << "\n";
      if (const Value* cols = v.find("additionalPrinterColumns");
          cols != nullptr && cols->is_list()) {
        md << "\n`kubectl get` columns:";
        bool first = true;
        for (const Value& c : cols->as_list()) {
          md << (first ? " " : ", ") << c.get_string({"name"});
          if (const Value* p = c.find("priority"); p != nullptr && p->is_int() && p->as_int() > 0)
            md << " (wide)";
          first = false;
        }
        md << ".\n";
      }
      std::vector<std::string> object_rules;
      if (const Value* rules = root->find("x-kubernetes-validations"); rules && rules->is_list())
        for (const Value& r : rules->as_list()) object_rules.push_back(str(r, "message"));
      if (!object_rules.empty()) {
        md << "\nRules on the whole object:\n\n";
        for (const std::string& m : object_rules) md << "- " << cell(m) << "\n";
      }
      std::set<std::string> req;
      if (const Value* r = root->find("required"); r != nullptr && r->is_list())
        for (const Value& x : r->as_list()) req.insert(scalar(x));
      for (std::string_view part : {"spec", "status"}) {
        const Value* s = root->get({"properties", part});
        if (s == nullptr) continue;
        std::vector<Row> rows;
        walk(*s, std::string(part), req.count(std::string(part)) != 0, rows);
        md << "\n#### " << k.name << " " << part << "\n";
        md << "\n| field | type | required | default | validation | description |\n"
           << "|---|---|---|---|---|---|\n";
        for (const Row& r : rows)
          md << "| `" << r.path << "` | " << cell(r.type) << " | " << r.required << " | "
             << r.default_ << " | " << r.facts << " | " << r.description << " |\n";
      }
    }
  }
  return md.str();
}

// The subcommand names a CLI11 help text lists (the lines of its "Subcommands:" section).
std::vector<std::string> subcommands_of(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    std::string lower = line;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower.rfind("subcommands:", 0) == 0) {
      in_section = true;
      continue;
    }
    if (!in_section) continue;
    if (line.empty()) {
      in_section = false;
      continue;
    }
    if (line.size() > 2 && line.compare(0, 2, "  ") == 0 && line[2] != ' ') {
      std::string name = line.substr(2, line.find(' ', 2) - 2);
      out.push_back(name);
    } else if (line[0] != ' ') {
      in_section = false;
    }
  }
  return out;
}

std::string help_of(const std::string& binary, const std::vector<std::string>& words) {
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), words.begin(), words.end());
  argv.push_back("--help");
  gpufleet::core::SubprocessOptions opt;
  opt.stderr_to = gpufleet::core::StderrTo::Output;
  opt.max_output = 1u << 20;
  // A fixed, minimal environment: nothing the help text shows may depend on the caller's.
  std::vector<std::string> env{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "LC_ALL=C",
                               "ASAN_OPTIONS=detect_leaks=0", "COLUMNS=100"};
  opt.env = &env;
  opt.search_path = false;
  gpufleet::core::SubprocessResult r = gpufleet::core::run_subprocess(argv, opt);
  if (!r.ok()) {
    std::string cmd = "gpufleet";
    for (const auto& w : words) cmd += " " + w;
    throw std::runtime_error(cmd + " --help: " + r.describe());
  }
  return r.output;
}

void collect_cli(const std::string& binary, std::vector<std::string> words, std::ostringstream& md,
                 std::ostringstream& toc) {
  std::string help = help_of(binary, words);
  // CLI11 ends every help with a blank line; one newline closes the block.
  while (!help.empty() && (help.back() == '\n' || help.back() == ' ')) help.pop_back();
  help += '\n';
  std::string cmd = "gpufleet";
  for (const auto& w : words) cmd += " " + w;
  std::string anchor = cmd;
  std::replace(anchor.begin(), anchor.end(), ' ', '-');
  toc << std::string(2 * words.size(), ' ') << "- [`" << cmd << "`](#" << anchor << ")\n";
  md << "\n"
     << std::string(std::min<std::size_t>(words.size() + 2, 4), '#') << " " << cmd << "\n\n```\n"
     << help << "```\n";
  std::vector<std::string> subs = subcommands_of(help);
  std::sort(subs.begin(), subs.end());
  for (const std::string& s : subs) {
    std::vector<std::string> next = words;
    next.push_back(s);
    collect_cli(binary, next, md, toc);
  }
}

std::string cli_markdown(const std::string& binary) {
  std::ostringstream md, toc;
  collect_cli(binary, {}, md, toc);
  std::ostringstream out;
  out << "# CLI reference\n\n"
      << "Generated from `gpufleet --help` and the `--help` of every subcommand it lists, by `"
      << kRegenerate
      << "`; do not edit by hand (the `docs_reference` test fails when this file is stale).\n"
      << "Exit codes are in the [README](../../README.md#exit-codes).\n\n"
      << toc.str() << md.str();
  return out.str();
}

std::string read_or_empty(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int usage() {
  std::cerr << "usage: docs_reference (--write|--check) DIR --crds CRD_DIR --gpufleet BINARY\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, dir, crd_dir, binary;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "--write" || a == "--check") && i + 1 < argc) {
      mode = a;
      dir = argv[++i];
    } else if (a == "--crds" && i + 1 < argc) {
      crd_dir = argv[++i];
    } else if (a == "--gpufleet" && i + 1 < argc) {
      binary = argv[++i];
    } else {
      return usage();
    }
  }
  if (mode.empty() || crd_dir.empty() || binary.empty()) return usage();
  try {
    std::vector<fs::path> crds;
    for (const auto& e : fs::directory_iterator(crd_dir))
      if (e.is_regular_file() && e.path().extension() == ".yaml") crds.push_back(e.path());
    std::sort(crds.begin(), crds.end());
    if (crds.empty()) throw std::runtime_error("no *.yaml in " + crd_dir);
    const std::map<std::string, std::string> files{{"crds.md", crd_markdown(crds)},
                                                   {"cli.md", cli_markdown(binary)}};
    int stale = 0;
    for (const auto& [name, text] : files) {
      fs::path p = fs::path(dir) / name;
      if (mode == "--write") {
        fs::create_directories(dir);
        if (read_or_empty(p) != text) {
          std::ofstream(p, std::ios::binary) << text;
          std::cout << "wrote " << p.string() << "\n";
        }
      } else if (std::string old = read_or_empty(p); old != text) {
        std::size_t line = 1;
        for (std::size_t i = 0; i < std::min(old.size(), text.size()) && old[i] == text[i]; ++i)
          line += old[i] == '\n' ? 1 : 0;
        std::cerr << "stale: docs/reference/" << name << " differs from what the CRDs and the "
                  << "gpufleet binary give (first at line " << line << "); regenerate it with "
                  << kRegenerate << " and commit it\n";
        ++stale;
      }
    }
    if (stale == 0 && mode == "--check") std::cout << "docs reference up to date\n";
    return stale == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "docs_reference: " << e.what() << "\n";
    return 1;
  }
}
