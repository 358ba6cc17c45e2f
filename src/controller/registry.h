// The controllers `gpufleet controller --controllers=a,b` can run, by name. A subsystem
// registers its controller from a file compiled into the gpufleet binary (src/cli/, as
// commands do; a static object in a static library would be dropped by the linker):
//
//   static controller::Registration reg({
//       .name = "hostpkg",
//       .description = "rolls host packages out node by node",
//       .settings = {{"hostpkg.max-unavailable", "nodes updated at once (default 1)"}},
//       .setup = [](controller::Manager& m, const controller::Context& ctx) { ... },
//   });
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace gpufleet::controller {

class Manager;

// What the command gives each controller's setup.
struct Context {
  std::string namespace_;  // --namespace: "" = all namespaces
  // --set name.key=value pairs (only keys the definition declares are accepted).
  std::map<std::string, std::string> settings;

  // The setting's value, or `fallback` when it was not set.
  [[nodiscard]] std::string setting(const std::string& key, const std::string& fallback) const;
};

struct Definition {
  std::string name;  // DNS label; also the controller's metrics label and field manager suffix
  std::string description;
  // Setting keys this controller reads ("echo.delay") and their help.
  std::vector<std::pair<std::string, std::string>> settings;
  // Adds the controller (and the caches it reads) to the manager.
  std::function<void(Manager&, const Context&)> setup;
};

class Registry {
 public:
  static Registry& global();
  // Throws core::InvalidInput for a duplicate or invalid name.
  void add(Definition d);
  [[nodiscard]] const Definition* find(const std::string& name) const;
  [[nodiscard]] std::vector<const Definition*> all() const;  // sorted by name

  // Parses "a,b" against the registry; throws core::InvalidInput naming an unknown controller
  // and listing the known ones.
  [[nodiscard]] std::vector<const Definition*> select(const std::string& list) const;
  // Checks every --set key belongs to a selected controller; throws core::InvalidInput naming
  // the key and the accepted ones.
  static void check_settings(const std::vector<const Definition*>& selected,
                             const std::map<std::string, std::string>& settings);

 private:
  std::map<std::string, Definition> defs_;
};

struct Registration {
  explicit Registration(Definition d) { Registry::global().add(std::move(d)); }
};

}  // namespace gpufleet::controller
