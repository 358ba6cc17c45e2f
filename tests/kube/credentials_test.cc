#include "kube/credentials.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/errors.h"

namespace gpufleet::kube {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("kube-cred-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Credentials, TokenFileIsReReadWhenRotated) {
  TempDir dir;
  fs::path token = dir.path() / "token";
  std::ofstream(token) << "first\n";
  ClientConfig cfg;
  cfg.token_file = token.string();
  Credentials creds(cfg);
  EXPECT_EQ(creds.current().bearer_token, "first");
  // Kubelet rotates projected tokens by replacing the file; the mtime changes.
  std::ofstream(token) << "second\n";
  struct timespec times[2] = {{0, UTIME_OMIT}, {1700000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, token.c_str(), times, 0), 0);
  EXPECT_EQ(creds.current().bearer_token, "second");
  EXPECT_TRUE(creds.invalidate());
}

TEST(Credentials, StaticTokenCannotBeRefreshed) {
  ClientConfig cfg;
  cfg.token = "static";
  Credentials creds(cfg);
  EXPECT_EQ(creds.current().bearer_token, "static");
  EXPECT_FALSE(creds.invalidate());
}

// A plugin script that counts its runs and echoes what it was given.
ClientConfig plugin_config(const TempDir& dir, const std::string& expiry) {
  fs::path script = dir.path() / "plugin.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                           "echo run >> \""
                        << (dir.path() / "runs").string()
                        << "\"\n"
                           "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \""
                        << (dir.path() / "info").string()
                        << "\"\n"
                           "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                           "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-%s-%s\""
                        << (expiry.empty() ? "" : ",\"expirationTimestamp\":\"" + expiry + "\"")
                        << "}}' \"$REGION\" \"$1\"\n";
  fs::permissions(script, fs::perms::owner_all);
  ClientConfig cfg;
  cfg.server = "https://k.example";
  cfg.ca_pem = "CA";
  ExecConfig x;
  x.api_version = "client.authentication.k8s.io/v1";
  x.command = "./plugin.sh";
  x.args = {"blue"};
  x.env = {{"REGION", "eu"}};
  x.provide_cluster_info = true;
  x.working_dir = dir.path().string();
  cfg.exec = x;
  return cfg;
}

int runs(const TempDir& dir) {
  std::string s = slurp(dir.path() / "runs");
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(Credentials, ExecPluginIsCachedUntilExpiry) {
  TempDir dir;
  Credentials creds(plugin_config(dir, "2999-01-01T00:00:00Z"));
  EXPECT_EQ(creds.current().bearer_token, "tok-eu-blue");
  EXPECT_EQ(creds.current().bearer_token, "tok-eu-blue");
  EXPECT_EQ(runs(dir), 1);
  std::string info = slurp(dir.path() / "info");
  EXPECT_THAT(info, HasSubstr("\"kind\":\"ExecCredential\""));
  EXPECT_THAT(info, HasSubstr("\"server\":\"https://k.example\""));
  EXPECT_THAT(info, HasSubstr("\"interactive\":false"));
  // A 401 makes the next request run the plugin again.
  EXPECT_TRUE(creds.invalidate());
  EXPECT_EQ(creds.current().bearer_token, "tok-eu-blue");
  EXPECT_EQ(runs(dir), 2);
}

TEST(Credentials, ExpiredExecCredentialIsFetchedAgain) {
  TempDir dir;
  Credentials creds(plugin_config(dir, "2001-01-01T00:00:00Z"));
  (void)creds.current();
  (void)creds.current();
  EXPECT_EQ(runs(dir), 2);
}

TEST(Credentials, ExecPluginFailuresAreClear) {
  TempDir dir;
  ClientConfig cfg = plugin_config(dir, "not-a-time");
  Credentials bad_time(cfg);
  try {
    (void)bad_time.current();
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("expirationTimestamp \"not-a-time\" is not an RFC 3339"));
  }
  cfg.exec->command = "/nonexistent/plugin";
  cfg.exec->install_hint = "see the wiki";
  Credentials missing(cfg);
  try {
    (void)missing.current();
    FAIL();
  } catch (const core::InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot be started"));
    EXPECT_THAT(e.what(), HasSubstr("see the wiki"));
  }
}

TEST(Time, Rfc3339AndMicroTime) {
  auto t = parse_rfc3339("2026-11-30T05:00:00Z");
  ASSERT_TRUE(t);
  EXPECT_EQ(format_micro_time(*t), "2026-11-30T05:00:00.000000Z");
  auto frac = parse_rfc3339("2026-11-30T05:00:00.123456789+01:00");
  ASSERT_TRUE(frac);
  EXPECT_EQ(format_micro_time(*frac), "2026-11-30T04:00:00.123456Z");
  EXPECT_FALSE(parse_rfc3339("yesterday"));
}

}  // namespace
}  // namespace gpufleet::kube
