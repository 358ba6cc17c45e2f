// The Xid catalog: the compiled-in data loads, and catalog documents are read strictly.
#include "core/xid_catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "support/source_paths.h"

namespace gpufleet::core {
namespace {

using ::testing::HasSubstr;

std::string error_of(std::string_view yaml) {
  try {
    XidCatalog::parse(yaml, "c.yaml");
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "no error";
}

TEST(XidCatalog, BuiltinMatchesTheDataFile) {
  const XidCatalog& c = XidCatalog::builtin();
  std::ifstream in(GPUFLEET_SOURCE_DIR + "/data/xid/catalog.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const XidCatalog file = XidCatalog::parse(text.str(), "data/xid/catalog.yaml");
  ASSERT_EQ(c.xids().size(), file.xids().size());
  EXPECT_EQ(c.sxids().size(), file.sxids().size());
  const XidInfo* x79 = c.find(79);
  ASSERT_NE(x79, nullptr);
  EXPECT_EQ(x79->name, "GPU has fallen off the bus");
  EXPECT_EQ(x79->severity, XidSeverity::Critical);
  EXPECT_EQ(x79->action, XidAction::RebootNode);
  EXPECT_EQ(x79->effect, XidEffect::FallenOff);
  EXPECT_EQ(action_name(c.find(13)->action), "restart-app");
  EXPECT_EQ(severity_name(c.find(63)->severity), "info");
  EXPECT_EQ(c.find(12345), nullptr);
  ASSERT_NE(c.find_sxid(20009), nullptr);
  EXPECT_FALSE(c.find_sxid(20009)->fatal);
  EXPECT_TRUE(c.find_sxid(24007)->fatal);
  // The codes the reference lists with a recommended action are all there.
  for (int code : {13,  31,  43,  45,  48,  62,  63,  64,  74,  79,  92,  94,  95,
                   109, 119, 120, 140, 143, 144, 145, 146, 147, 148, 149, 150, 154}) {
    EXPECT_NE(c.find(code), nullptr) << code;
  }
}

TEST(XidCatalog, FillsPlaceholders) {
  EXPECT_EQ(fill_xid_message("link {link} of {gpc}",
                             [](std::string_view n) {
                               return n == "link" ? std::string("14") : std::string("2");
                             }),
            "link 14 of 2");
  EXPECT_EQ(fill_xid_message("no details", [](std::string_view) { return std::string("x"); }),
            "no details");
}

TEST(XidCatalog, ReadsStrictly) {
  const std::string head = "apiVersion: gpufleet.io/v1alpha1\nkind: XidCatalog\n";
  const std::string ok =
      "xids:\n- {code: 79, name: off the bus, severity: critical, action: reboot-node, "
      "message: gone}\n";
  EXPECT_EQ(error_of(head + ok), "no error");
  EXPECT_THAT(error_of(head + "xids:\n- {code: 79, name: n, severity: critical, action: "
                              "reboot-node, mesage: gone}\n"),
              HasSubstr("c.yaml:4:64: xids[0].mesage: is not a known field (did you mean "
                        "\"message\"?"));
  EXPECT_THAT(error_of(head + "xids:\n- {code: 79, name: n, severity: fatal, action: ignore, "
                              "message: m}\n"),
              HasSubstr("xids[0].severity: value \"fatal\" is not supported"));
  EXPECT_THAT(error_of(head + "xids:\n- {code: 79, name: n, severity: info, action: ignore, "
                              "message: \"link {lnk}\"}\n"),
              HasSubstr("has an unknown placeholder {lnk}"));
  EXPECT_THAT(error_of(head + ok +
                       "- {code: 79, name: again, severity: info, action: ignore, "
                       "message: m}\n"),
              HasSubstr("xids[1].code: value 79 is listed twice"));
  EXPECT_THAT(error_of(head + "sxids:\n- {code: 20009, fatal: maybe, text: t}\n"),
              HasSubstr("sxids[0].fatal: value \"maybe\" is not a boolean"));
  EXPECT_THAT(error_of("apiVersion: gpufleet.io/v1alpha1\nkind: Recipe\n"),
              HasSubstr("kind: value \"Recipe\" is not supported"));
}

}  // namespace
}  // namespace gpufleet::core
