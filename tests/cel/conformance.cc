#include "conformance.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cel/cel.h"
#include "cel/eval.h"
#include "core/base64.h"
#include "core/errors.h"
#include "core/json.h"

namespace gpufleet::cel::conformance {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw core::InvalidInput("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A declared type in the test's type_env (protobuf CEL Type as JSON).
Type decl_type(const core::Value& t) {
  if (const core::Value* p = t.find("primitive")) {
    const std::string& s = p->as_string();
    if (s == "INT64") return types::integer();
    if (s == "UINT64") return types::uinteger();
    if (s == "DOUBLE") return types::dbl();
    if (s == "BOOL") return types::boolean();
    if (s == "STRING") return types::string();
    if (s == "BYTES") return types::bytes();
  }
  if (t.find("null") != nullptr) return types::null_type();
  if (const core::Value* l = t.find("list_type")) {
    const core::Value* e = l->find("elem_type");
    return types::list(e != nullptr ? decl_type(*e) : types::dyn());
  }
  if (const core::Value* m = t.find("map_type")) {
    const core::Value* k = m->find("key_type");
    const core::Value* v = m->find("value_type");
    return types::map(k != nullptr ? decl_type(*k) : types::dyn(),
                      v != nullptr ? decl_type(*v) : types::dyn());
  }
  if (const core::Value* w = t.find("well_known")) {
    if (w->as_string() == "TIMESTAMP") return types::timestamp();
    if (w->as_string() == "DURATION") return types::duration();
  }
  return types::dyn();
}

double json_double(const core::Value& v) {
  if (v.is_string()) {
    const std::string& s = v.as_string();
    if (s == "NaN") return std::nan("");
    if (s == "Infinity") return HUGE_VAL;
    if (s == "-Infinity") return -HUGE_VAL;
    return std::stod(s);
  }
  return v.as_double();
}

// Converts a conformance VALUE into a CEL value (for bindings and map keys).
Val to_val(const core::Value& v) {
  if (v.find("null_value") != nullptr) return Val::null();
  if (const core::Value* b = v.find("bool_value")) return Val::boolean(b->as_bool());
  if (const core::Value* i = v.find("int64_value")) {
    return Val::integer(i->is_string() ? std::stoll(i->as_string()) : i->as_int());
  }
  if (const core::Value* u = v.find("uint64_value")) {
    return Val::uinteger(u->is_string() ? std::stoull(u->as_string()) : u->as_uint());
  }
  if (const core::Value* d = v.find("double_value")) return Val::dbl(json_double(*d));
  if (const core::Value* s = v.find("string_value")) return Val::string(s->as_string());
  if (const core::Value* b = v.find("bytes_value")) {
    auto raw = core::base64_decode(b->as_string());
    if (!raw) throw core::InvalidInput("bad base64 in test data");
    return Val::bytes(*raw);
  }
  if (const core::Value* l = v.find("list_value")) {
    std::vector<Val> items;
    if (const core::Value* vals = l->find("values")) {
      for (const auto& item : vals->as_list()) items.push_back(to_val(item));
    }
    return Val::list(std::move(items));
  }
  if (const core::Value* m = v.find("map_value")) {
    std::vector<std::pair<Val, Val>> entries;
    if (const core::Value* es = m->find("entries")) {
      for (const auto& e : es->as_list())
        entries.emplace_back(to_val(*e.find("key")), to_val(*e.find("value")));
    }
    return make_map(std::move(entries));
  }
  throw core::InvalidInput("unsupported value in test data (protobuf messages, enums, types)");
}

bool matches_expected(const Val& got, const core::Value& exp, std::string* why) {
  auto mismatch = [&](const std::string& want) {
    *why = "got " +
           (got.is_error() ? "error: " + got.error_message()
                           : std::string(got.type_name()) + " " + got.debug_string()) +
           ", want " + want;
    return false;
  };
  if (const core::Value* t = exp.find("type_value")) {
    if (got.kind() != ValKind::Type || got.text() != t->as_string())
      return mismatch("type " + t->as_string());
    return true;
  }
  if (const core::Value* l = exp.find("list_value")) {
    const core::Value* vals = l->find("values");
    std::size_t n = vals != nullptr ? vals->size() : 0;
    if (got.kind() != ValKind::List || got.size() != n)
      return mismatch("list of " + std::to_string(n));
    for (std::size_t i = 0; i < n; ++i) {
      if (!matches_expected(got.list_at(i), (*vals)[i], why)) return false;
    }
    return true;
  }
  if (const core::Value* m = exp.find("map_value")) {
    const core::Value* es = m->find("entries");
    std::size_t n = es != nullptr ? es->size() : 0;
    if (got.kind() != ValKind::Map || got.size() != n)
      return mismatch("map of " + std::to_string(n));
    for (std::size_t i = 0; i < n; ++i) {
      const core::Value& e = (*es)[i];
      Val value;
      Val key = to_val(*e.find("key"));
      if (!got.map_find(key, &value)) return mismatch("key " + key.debug_string());
      if (!matches_expected(value, *e.find("value"), why)) return false;
    }
    return true;
  }
  Val want = to_val(exp);
  if (got.kind() != want.kind())
    return mismatch(std::string(want.type_name()) + " " + want.debug_string());
  if (want.kind() == ValKind::Double) {
    double a = got.as_double(), b = want.as_double();
    if ((std::isnan(a) && std::isnan(b)) || a == b) return true;
    return mismatch(want.debug_string());
  }
  if (!equals(got, want)) return mismatch(want.debug_string());
  return true;
}

// Runs one test; returns "" on success, else the reason.
std::string run_test(const core::Value& t) {
  Env env;
  if (const core::Value* c = t.find("container")) env.container(c->as_string());
  if (const core::Value* d = t.find("disable_check")) env.disable_check(d->as_bool());
  if (const core::Value* d = t.find("disable_macros")) env.disable_macros(d->as_bool());
  if (const core::Value* decls = t.find("type_env")) {
    for (const auto& d : decls->as_list()) {
      const core::Value* ident = d.find("ident");
      if (ident == nullptr) continue;  // function declarations: builtins are already known
      const core::Value* type = ident->find("type");
      env.variable(d.find("name")->as_string(), type != nullptr ? decl_type(*type) : types::dyn());
    }
  }
  Activation act;
  if (const core::Value* b = t.find("bindings")) {
    for (const auto& entry : b->as_map()) {
      const core::Value* v = entry.value.find("value");
      if (v == nullptr) return "binding '" + entry.key + "' is not a value";
      act.bind(entry.key, to_val(*v));
    }
  }
  const std::string& expr = t.find("expr")->as_string();
  Program program;
  try {
    program = compile(expr, env);
  } catch (const CompileError& e) {
    return std::string("compile error: ") + e.what();
  }
  Val got = program.evaluate(act);
  if (t.find("eval_error") != nullptr) {
    if (got.is_error()) return "";
    return "expected an evaluation error, got " + std::string(got.type_name()) + " " +
           got.debug_string();
  }
  std::string why;
  if (const core::Value* v = t.find("value")) {
    if (!matches_expected(got, *v, &why)) return why;
    return "";
  }
  if (const core::Value* tr = t.find("typed_result")) {
    if (!matches_expected(got, *tr->find("result"), &why)) return why;
    return "";
  }
  if (!got.is_bool() || !got.as_bool()) {
    return "expected true, got " +
           (got.is_error() ? "error: " + got.error_message() : got.debug_string());
  }
  return "";
}

}  // namespace

std::map<std::string, std::string> read_skip_list(const std::string& path) {
  std::map<std::string, std::string> out;
  std::istringstream in(read_file(path));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto hash = line.find('#');
    if (hash == 0) continue;
    std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    std::size_t end = line.find_first_of(" \t", start);
    std::size_t reason =
        end == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", end);
    if (reason == std::string::npos) {
      throw core::InvalidInput(path + ":" + std::to_string(n) + ": skip entry '" +
                               line.substr(start) +
                               "' has no reason; write 'file/section/test  why it is skipped'");
    }
    out[line.substr(start, end - start)] = line.substr(reason);
  }
  return out;
}

std::vector<FileResult> run_folder(const std::string& folder,
                                   const std::map<std::string, std::string>& skips) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<FileResult> results;
  for (const auto& path : files) {
    FileResult r;
    std::string stem = std::filesystem::path(path).stem().string();
    r.file = stem;
    core::Value doc = core::parse_json(read_file(path), path);
    const core::Value* sections = doc.find("section");
    if (sections == nullptr) continue;
    for (const auto& section : sections->as_list()) {
      const core::Value* tests = section.find("test");
      if (tests == nullptr) continue;
      std::string sname(section.get_string({"name"}));
      for (const auto& t : tests->as_list()) {
        std::string id = stem + "/" + sname + "/" + std::string(t.get_string({"name"}));
        std::string why;
        try {
          why = run_test(t);
        } catch (const std::exception& e) {
          why = std::string("exception: ") + e.what();
        }
        bool skipped = skips.count(id) > 0;
        if (skipped) {
          ++r.skipped;
          if (why.empty()) ++r.skipped_but_passing;
        } else if (why.empty()) {
          ++r.passed;
        } else {
          ++r.failed;
          std::replace(why.begin(), why.end(), '\n', ' ');
          r.failures.push_back(id + ": " + why);
        }
      }
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace gpufleet::cel::conformance
