// Validation by certify before the uncordon (spec.validation): the spec block (defaults,
// strict errors naming field, value and fix), when a node's change asks for it, and the
// record's ValidationRequest name (round trip; cleared by a completed step and by Done).
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/json.h"
#include "hostpkg/node_record.h"
#include "hostpkg/stage_plan.h"
#include "test_util.h"

namespace gpufleet::hostpkg {
namespace {

using testing::set_from_yaml;
using namespace std::chrono_literals;

const char* kPackages =
    "  packages:\n"
    "    driver:\n"
    "      version: 1.0.0\n"
    "      image: r/driver\n"
    "      interrupt: {type: reboot}\n";

std::string error_of(const std::string& yaml) {
  try {
    set_from_yaml(yaml + kPackages);
  } catch (const core::InvalidInput& e) {
    return e.what();
  }
  return "";
}

TEST(Validation, SpecDefaultsToInterruptingWithDcgmR1) {
  HostPackageSet s = set_from_yaml(kPackages);
  EXPECT_EQ(s.validation.when, ValidateWhen::Interrupting);
  EXPECT_EQ(s.validation.categories, std::vector<std::string>{"diagnostics/dcgm-r1"});
  EXPECT_EQ(s.validation.deadline, 1800s);
  EXPECT_TRUE(s.validation.required(true));
  EXPECT_FALSE(s.validation.required(false));
}

TEST(Validation, SpecParses) {
  HostPackageSet s = set_from_yaml(
      "  validation: {when: Always, categories: [diagnostics/dcgm-r2, "
      "communication/nccl-all-reduce], deadlineSeconds: 600}\n" +
      std::string(kPackages));
  EXPECT_EQ(s.validation.when, ValidateWhen::Always);
  EXPECT_EQ(s.validation.categories,
            (std::vector<std::string>{"diagnostics/dcgm-r2", "communication/nccl-all-reduce"}));
  EXPECT_EQ(s.validation.deadline, 600s);
  EXPECT_TRUE(s.validation.required(false));
  HostPackageSet never = set_from_yaml("  validation: {when: Never}\n" + std::string(kPackages));
  EXPECT_FALSE(never.validation.required(true));
  EXPECT_EQ(never.validation.categories, std::vector<std::string>{"diagnostics/dcgm-r1"});
  EXPECT_EQ(validate_when_name(ValidateWhen::Interrupting), "Interrupting");
  EXPECT_EQ(validate_when_name(ValidateWhen::Never), "Never");
}

TEST(Validation, SpecErrorsNameFieldValueAndFix) {
  std::string e = error_of("  validation: {when: Sometimes}\n");
  EXPECT_NE(e.find("spec.validation.when: \"Sometimes\" is not a policy; use Interrupting"),
            std::string::npos)
      << e;
  e = error_of("  validation: {categories: []}\n");
  EXPECT_NE(e.find("spec.validation.categories: 0 categories; give 1 to 16"), std::string::npos)
      << e;
  EXPECT_NE(e.find("when: Never"), std::string::npos) << e;
  e = error_of("  validation: {categories: [dcgm]}\n");
  EXPECT_NE(e.find("spec.validation.categories[0]: \"dcgm\" is not a certify catalog id"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("diagnostics/dcgm-r1"), std::string::npos) << e;
  e = error_of("  validation: {categories: [diagnostics/dcgm-r1, Diagnostics/DCGM]}\n");
  EXPECT_NE(e.find("spec.validation.categories[1]: \"Diagnostics/DCGM\""), std::string::npos) << e;
  e = error_of("  validation: {deadlineSeconds: 5}\n");
  EXPECT_NE(e.find("spec.validation.deadlineSeconds"), std::string::npos) << e;
  EXPECT_NE(e.find("60 to 86400"), std::string::npos) << e;
  e = error_of("  validation: {deadlineSeconds: 100000}\n");
  EXPECT_NE(e.find("spec.validation.deadlineSeconds"), std::string::npos) << e;
  e = error_of("  validation: {when: Always, timeout: 5m}\n");
  EXPECT_NE(e.find("spec.validation"), std::string::npos) << e;
  EXPECT_NE(e.find("timeout"), std::string::npos) << e;
  e = error_of("  validation: Always\n");
  EXPECT_NE(e.find("spec.validation"), std::string::npos) << e;
}

TEST(Validation, RecordKeepsTheRequestUntilAStepOrDone) {
  NodeRecord r;
  r.set = "drivers";
  r.state = NodeState::InProgress;
  r.validation = "hostpkg-drivers-gpu-1-g4";
  RecordRead back = record_from_value(core::parse_json(core::to_json(record_to_value(r))));
  ASSERT_TRUE(back.record) << back.error;
  EXPECT_EQ(back.record->validation, "hostpkg-drivers-gpu-1-g4");
  // Written only when set: a record without one reads as before.
  r.validation.clear();
  EXPECT_EQ(record_to_value(r).find("validation"), nullptr);

  HostPackageSet set = set_from_yaml(kPackages);
  DesiredState desired = digest(set);
  NodeRecord rec;
  rec.set = "drivers";
  rec.state = NodeState::InProgress;
  rec.validation = "hostpkg-drivers-gpu-1-g4";
  NodePlan plan = plan_node(desired, rec);
  ASSERT_FALSE(plan.steps.empty());
  record_step_done(rec, desired, plan.steps.front());
  EXPECT_EQ(rec.validation, "");  // a later state of the node is validated anew
  rec.validation = "hostpkg-drivers-gpu-1-g9";
  mark_node_done(rec, desired);
  EXPECT_EQ(rec.validation, "");
}

TEST(Validation, ARebootDeliveredMakesTheChangeInterrupting) {
  HostPackageSet set = set_from_yaml(kPackages);
  DesiredState desired = digest(set);
  NodeRecord rec;
  rec.set = "drivers";
  rec.state = NodeState::InProgress;
  for (int i = 0; i < 10; ++i) {
    NodePlan plan = plan_node(desired, rec);
    if (plan.steps.empty()) break;
    record_step_done(rec, desired, plan.steps.front());
  }
  EXPECT_TRUE(plan_node(desired, rec).steps.empty());
  EXPECT_TRUE(rec.interrupted);
  EXPECT_TRUE(set.validation.required(rec.interrupted));
}

}  // namespace
}  // namespace gpufleet::hostpkg
