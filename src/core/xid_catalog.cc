#include "core/xid_catalog.h"

#include <algorithm>
#include <array>

#include "core/errors.h"
#include "core/field_reader.h"
#include "core/yaml.h"

namespace gpufleet::core {

std::string_view builtin_xid_catalog_text();  // generated from data/xid/catalog.yaml

namespace {

constexpr std::array<std::string_view, 3> kSeverities = {"info", "warning", "critical"};
constexpr std::array<std::string_view, 6> kActions = {
    "ignore", "restart-app", "reset-gpu", "reboot-node", "decode", "follow-action"};
constexpr std::array<std::string_view, 8> kEffects = {"none",
                                                      "fallen-off",
                                                      "double-bit-ecc",
                                                      "row-remap-pending",
                                                      "row-remap-failure",
                                                      "single-bit-ecc-burst",
                                                      "contained-ecc",
                                                      "nvlink-down"};

template <std::size_t N>
std::size_t index_of(const std::array<std::string_view, N>& names, std::string_view s) {
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), s) - names.begin());
}

// Checks that every {name} of `message` is a known placeholder and the braces pair up.
void check_placeholders(FieldReader& r, const Value& message) {
  const std::string& m = message.as_string();
  for (std::size_t open = m.find('{'); open != std::string::npos; open = m.find('{', open + 1)) {
    const std::size_t close = m.find('}', open);
    const std::string_view name = close == std::string::npos
                                      ? std::string_view{}
                                      : std::string_view(m).substr(open + 1, close - open - 1);
    if (std::find(std::begin(kXidPlaceholders), std::end(kXidPlaceholders), name) ==
        std::end(kXidPlaceholders)) {
      std::string known;
      for (std::string_view p : kXidPlaceholders)
        known += (known.empty() ? "" : ", ") + std::string(p);
      r.fail("message", message, "has an unknown placeholder {" + std::string(name) + "}",
             "use one of: " + known);
    }
  }
}

XidInfo read_xid(const Value& v, const std::string& source, const std::string& path) {
  FieldReader r(v, source, path);
  XidInfo x;
  x.code = static_cast<int>(r.integer("code", std::nullopt, 1, 999, "an Xid code, e.g. 79"));
  x.name = r.required_string("name", "a short name, e.g. GPU has fallen off the bus");
  x.severity = static_cast<XidSeverity>(
      index_of(kSeverities, r.one_of("severity", std::nullopt, {"info", "warning", "critical"})));
  x.action = static_cast<XidAction>(index_of(
      kActions,
      r.one_of("action", std::nullopt,
               {"ignore", "restart-app", "reset-gpu", "reboot-node", "decode", "follow-action"})));
  x.effect = static_cast<XidEffect>(index_of(
      kEffects,
      r.one_of("effect", "none",
               {"none", "fallen-off", "double-bit-ecc", "row-remap-pending", "row-remap-failure",
                "single-bit-ecc-burst", "contained-ecc", "nvlink-down"})));
  x.message = r.required_string("message", "the driver's text for the code");
  check_placeholders(r, *r.get("message"));
  r.done();
  return x;
}

SXidInfo read_sxid(const Value& v, const std::string& source, const std::string& path) {
  FieldReader r(v, source, path);
  SXidInfo s;
  s.code = static_cast<int>(r.integer("code", std::nullopt, 1, 99999, "an SXid code, e.g. 20009"));
  s.fatal = r.boolean("fatal", false);
  s.text = r.required_string("text", "the error text, e.g. RX Short Error Rate");
  r.done();
  return s;
}

// Reads list `key` of the document with `read`, sorted by code, rejecting repeated codes.
template <class T, class Read>
std::vector<T> read_list(FieldReader& top, std::string_view key, const std::string& source,
                         Read read) {
  std::vector<T> out;
  const Value* list = top.get(key);
  if (list == nullptr) return out;
  if (!list->is_list()) top.fail(key, *list, "is not a list", "write one entry per code");
  for (std::size_t i = 0; i < list->as_list().size(); ++i) {
    const std::string path = std::string(key) + "[" + std::to_string(i) + "]";
    T item = read((*list)[i], source, path);
    for (const T& seen : out) {
      if (seen.code == item.code) {
        fail_field(source, path + ".code",
                   "value " + std::to_string(item.code) + " is listed twice",
                   "keep one entry per code");
      }
    }
    out.push_back(std::move(item));
  }
  std::sort(out.begin(), out.end(), [](const T& a, const T& b) { return a.code < b.code; });
  return out;
}

template <class T>
const T* find_code(const std::vector<T>& items, int code) noexcept {
  auto it = std::lower_bound(items.begin(), items.end(), code,
                             [](const T& x, int c) { return x.code < c; });
  return it != items.end() && it->code == code ? &*it : nullptr;
}

}  // namespace

XidCatalog XidCatalog::parse(std::string_view yaml, std::string_view source) {
  const std::string src(source);
  DocumentScope scope(src, yaml);
  const Value doc = parse_yaml(yaml, src);
  FieldReader top(doc, src, "");
  if (top.required_string("apiVersion", "gpufleet.io/v1alpha1") != "gpufleet.io/v1alpha1") {
    top.fail("apiVersion", *top.get("apiVersion"), "is not supported", "use gpufleet.io/v1alpha1");
  }
  top.one_of("kind", std::nullopt, {"XidCatalog"});
  XidCatalog c;
  c.xids_ = read_list<XidInfo>(top, "xids", src, read_xid);
  c.sxids_ = read_list<SXidInfo>(top, "sxids", src, read_sxid);
  top.done();
  return c;
}

const XidCatalog& XidCatalog::builtin() {
  static const XidCatalog catalog =
      parse(builtin_xid_catalog_text(), "builtin:data/xid/catalog.yaml");
  return catalog;
}

const XidInfo* XidCatalog::find(int code) const noexcept { return find_code(xids_, code); }

const SXidInfo* XidCatalog::find_sxid(int code) const noexcept { return find_code(sxids_, code); }

std::string_view severity_name(XidSeverity s) noexcept {
  return kSeverities[static_cast<std::size_t>(s)];
}

std::string_view action_name(XidAction a) noexcept { return kActions[static_cast<std::size_t>(a)]; }

std::string fill_xid_message(std::string_view message,
                             const std::function<std::string(std::string_view)>& value) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t open = message.find('{'); open != std::string_view::npos;
       open = message.find('{', at)) {
    const std::size_t close = message.find('}', open);
    if (close == std::string_view::npos) break;
    out.append(message.substr(at, open - at));
    out += value(message.substr(open + 1, close - open - 1));
    at = close + 1;
  }
  out.append(message.substr(at));
  return out;
}

}  // namespace gpufleet::core
