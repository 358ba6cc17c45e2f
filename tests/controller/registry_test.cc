// The controller registry behind `gpufleet controller --controllers=...`.
#include "controller/registry.h"

#include <gtest/gtest.h>

#include "core/errors.h"

namespace gpufleet::controller {
namespace {

Definition def(std::string name, std::vector<std::pair<std::string, std::string>> settings = {}) {
  return {std::move(name), "test", std::move(settings), [](Manager&, const Context&) {}};
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return {};
}

TEST(Registry, SelectsByNameAndNamesTheUnknown) {
  Registry r;
  r.add(def("alpha", {{"alpha.rate", "x"}}));
  r.add(def("beta"));
  auto s = r.select("beta,alpha,beta");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]->name, "beta");
  EXPECT_EQ(s[1]->name, "alpha");
  EXPECT_NE(message_of([&] {
              (void)r.select("alpha,gamma");
            }).find("unknown controller \"gamma\"; known: alpha, beta"),
            std::string::npos);
  EXPECT_NE(message_of([&] { (void)r.select(","); }).find("empty"), std::string::npos);
  EXPECT_NE(message_of([&] { r.add(def("alpha")); }).find("registered twice"), std::string::npos);
  EXPECT_NE(message_of([&] { r.add(def("Bad_Name")); }).find("controller name"), std::string::npos);
}

TEST(Registry, SettingsMustBelongToASelectedController) {
  Registry r;
  r.add(def("alpha", {{"alpha.rate", "x"}}));
  r.add(def("beta", {{"beta.size", "y"}}));
  auto alpha = r.select("alpha");
  EXPECT_EQ(message_of([&] { Registry::check_settings(alpha, {{"alpha.rate", "1"}}); }), "");
  EXPECT_NE(message_of([&] {
              Registry::check_settings(alpha, {{"beta.size", "1"}});
            })
                .find("--set beta.size=1: not a setting of the selected controllers; accepted: "
                      "alpha.rate"),
            std::string::npos);
  Context ctx{"", {{"alpha.rate", "5"}}};
  EXPECT_EQ(ctx.setting("alpha.rate", "1"), "5");
  EXPECT_EQ(ctx.setting("alpha.other", "1"), "1");
}

}  // namespace
}  // namespace gpufleet::controller
