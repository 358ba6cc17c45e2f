// Bundles in OCI registries, without a registry: the reproducible packer, the unpacker
// against hostile archives, reference parsing, docker config credentials and the manifest.
// The push and pull over HTTP are tested against a real registry in
// tests/integration/recipe/oci_push.sh.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/json.h"
#include "core/text.h"
#include "recipe/bundle_archive.h"
#include "recipe/oci_client.h"
#include "recipe/tool_process.h"

namespace gpufleet::recipe {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text, bool exec = false) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  fs::permissions(p, exec ? fs::perms(0755) : fs::perms(0644));
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ---- packer ----

TEST(BundleArchiveTest, SameFilesGiveSameBytesWhateverTheOrderTimesAndModes) {
  ToolTempDir tmp("oci-test");
  fs::path a = fs::path(tmp.path) / "a", b = fs::path(tmp.path) / "b";
  write(a / "recipe.yaml", "kind: Recipe\n");
  write(a / "components/z/values.yaml", "z: 1\n");
  write(a / "components/a/install.sh", "#!/bin/sh\n", true);
  write(a / "deploy.sh", "#!/bin/sh\necho deploy\n", true);
  // The same files, created in the opposite order, a second later, other group/other bits.
  sleep(1);
  write(b / "deploy.sh", "#!/bin/sh\necho deploy\n", true);
  write(b / "components/a/install.sh", "#!/bin/sh\n", true);
  fs::permissions(b / "components/a/install.sh", fs::perms(0700));
  write(b / "components/z/values.yaml", "z: 1\n");
  fs::permissions(b / "components/z/values.yaml", fs::perms(0600));
  write(b / "recipe.yaml", "kind: Recipe\n");

  std::string first = pack_bundle_dir(a.string());
  EXPECT_EQ(first, pack_bundle_dir(a.string()));
  EXPECT_EQ(first, pack_bundle_dir(b.string()));
  // gzip header: magic, then MTIME (bytes 4..7) zero and no FNAME flag (bit 3 of FLG).
  ASSERT_GT(first.size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>(first[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(first[1]), 0x8b);
  EXPECT_EQ(first.substr(4, 4), std::string(4, '\0'));
  EXPECT_EQ(static_cast<unsigned char>(first[3]) & 0x08, 0);

  // A changed byte changes the archive.
  write(b / "recipe.yaml", "kind: Recipe!\n");
  EXPECT_NE(first, pack_bundle_dir(b.string()));
}

TEST(BundleArchiveTest, EntriesAreSortedWithFixedOwnersTimesAndModes) {
  ToolTempDir tmp("oci-test");
  fs::path a = fs::path(tmp.path) / "a";
  write(a / "b.txt", "b");
  write(a / "a/run.sh", "x", true);
  write(a / "A.txt", "A");
  std::string packed = pack_bundle_dir(a.string());
  archive* r = archive_read_new();
  archive_read_support_filter_gzip(r);
  archive_read_support_format_tar(r);
  ASSERT_EQ(archive_read_open_memory(r, packed.data(), packed.size()), ARCHIVE_OK);
  archive_entry* e = nullptr;
  std::vector<std::string> names;
  while (archive_read_next_header(r, &e) == ARCHIVE_OK) {
    names.push_back(archive_entry_pathname(e));
    EXPECT_EQ(archive_entry_mtime(e), 0);
    EXPECT_EQ(archive_entry_uid(e), 0);
    EXPECT_EQ(archive_entry_gid(e), 0);
    const char* uname = archive_entry_uname(e);
    EXPECT_TRUE(uname == nullptr || *uname == '\0') << uname;
    EXPECT_EQ(archive_entry_perm(e), names.back() == "a/run.sh" ? 0755 : 0644) << names.back();
  }
  archive_read_free(r);
  EXPECT_EQ(names, (std::vector<std::string>{"A.txt", "a/run.sh", "b.txt"}));
}

TEST(BundleArchiveTest, RoundTripKeepsBytesAndExecutableBit) {
  ToolTempDir tmp("oci-test");
  fs::path a = fs::path(tmp.path) / "a", out = fs::path(tmp.path) / "out";
  write(a / "checksums.txt", "abc  recipe.yaml\n");
  write(a / "components/gpu-operator/install.sh", "#!/bin/sh\nexit 0\n", true);
  std::string long_name(120, 'n');  // past ustar's 100-byte name field
  write(a / "vendor" / (long_name + ".tgz"), std::string(100000, '\x01'));
  EXPECT_EQ(unpack_bundle_archive(pack_bundle_dir(a.string()), out.string(), "test"), 3u);
  EXPECT_EQ(read(out / "checksums.txt"), "abc  recipe.yaml\n");
  EXPECT_EQ(read(out / "vendor" / (long_name + ".tgz")), std::string(100000, '\x01'));
  EXPECT_EQ(fs::status(out / "components/gpu-operator/install.sh").permissions(), fs::perms(0755));
  EXPECT_EQ(fs::status(out / "checksums.txt").permissions(), fs::perms(0644));
  // A target named with a trailing slash, as shells complete folders.
  EXPECT_EQ(unpack_bundle_archive(pack_bundle_dir(a.string()), out.string() + "2/", "test"), 3u);
  EXPECT_EQ(read(fs::path(out.string() + "2") / "checksums.txt"), "abc  recipe.yaml\n");
  // The target must be new or empty.
  try {
    unpack_bundle_archive(pack_bundle_dir(a.string()), out.string(), "test");
    FAIL() << "unpacked into a non-empty directory";
  } catch (const core::InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("is not an empty directory"), std::string::npos)
        << e.what();
  }
}

TEST(BundleArchiveTest, PackRefusesLinks) {
  ToolTempDir tmp("oci-test");
  fs::path a = fs::path(tmp.path) / "a";
  write(a / "recipe.yaml", "x");
  fs::create_symlink("/etc/passwd", a / "passwd");
  try {
    pack_bundle_dir(a.string());
    FAIL() << "packed a symbolic link";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("passwd is not a regular file"), std::string::npos)
        << e.what();
  }
}

// ---- unpacker against hostile archives ----

struct Entry {
  Entry(std::string p, mode_t t = AE_IFREG, std::string d = {}, std::string l = {},
        std::string h = {})
      : path(std::move(p)),
        type(t),
        data(std::move(d)),
        link(std::move(l)),
        hardlink(std::move(h)) {}
  std::string path;
  mode_t type;
  std::string data;
  std::string link;      // symlink target
  std::string hardlink;  // hard link target
};

std::string make_archive(const std::vector<Entry>& entries) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_gzip(a);
  archive_write_set_bytes_in_last_block(a, 1);  // so that cutting the stream damages it
  archive_write_open(
      a, &out, nullptr,
      [](archive*, void* ud, const void* buf, size_t n) -> la_ssize_t {
        static_cast<std::string*>(ud)->append(static_cast<const char*>(buf), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  for (const Entry& x : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, x.path.c_str());
    archive_entry_set_filetype(e, x.type);
    archive_entry_set_perm(e, 0644);
    if (!x.link.empty()) archive_entry_set_symlink(e, x.link.c_str());
    if (!x.hardlink.empty()) archive_entry_set_hardlink(e, x.hardlink.c_str());
    archive_entry_set_size(e, x.type == AE_IFREG ? static_cast<la_int64_t>(x.data.size()) : 0);
    EXPECT_EQ(archive_write_header(a, e), ARCHIVE_OK) << x.path << archive_error_string(a);
    if (x.type == AE_IFREG && !x.data.empty()) archive_write_data(a, x.data.data(), x.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

// Unpacking must fail with all `words` in the message and leave nothing behind.
void expect_refused(const std::string& archive_bytes, const std::vector<std::string>& words,
                    const UnpackLimits& limits = {}) {
  ToolTempDir tmp("oci-test");
  fs::path out = fs::path(tmp.path) / "out";
  try {
    unpack_bundle_archive(archive_bytes, out.string(), "oci://r/x@sha256:1", limits);
    ADD_FAILURE() << "unpacked a hostile archive (" << words.front() << ")";
  } catch (const core::InvalidInput& e) {
    for (const std::string& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << w << " not in: " << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
  // Nothing written outside either, and no staging folder left.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path), fs::directory_iterator()), 0);
}

TEST(BundleArchiveTest, RefusesAbsolutePaths) {
  expect_refused(make_archive({{"ok.txt", AE_IFREG, "x"}, {"/tmp/evil", AE_IFREG, "x"}}),
                 {"oci://r/x@sha256:1", R"(entry "/tmp/evil")", "absolute path"});
}

TEST(BundleArchiveTest, RefusesDotDot) {
  expect_refused(make_archive({{"../evil", AE_IFREG, "x"}}), {R"(entry "../evil")", "'..'"});
  expect_refused(make_archive({{"a/../../evil", AE_IFREG, "x"}}),
                 {R"(entry "a/../../evil")", "'..'"});
}

TEST(BundleArchiveTest, RefusesNamesTheFileSystemCannotHold) {
  expect_refused(make_archive({{"a/" + std::string(256, 'n'), AE_IFREG, "x"}}),
                 {"a name longer than 255 bytes"});
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "dir" + std::to_string(i % 10) + "/";
  expect_refused(make_archive({{deep + "/" + std::string(200, 'f') + "/x", AE_IFREG, "x"}}),
                 {"a path longer than 1024 bytes"});
}

TEST(BundleArchiveTest, RefusesLinksAndDevices) {
  expect_refused(make_archive({{"escape", AE_IFLNK, "", "/etc"}}),
                 {R"(entry "escape")", R"(symbolic link to "/etc")"});
  expect_refused(make_archive({{"inside", AE_IFLNK, "", "recipe.yaml"}}),
                 {R"(entry "inside")", "symbolic link"});
  expect_refused(
      make_archive({{"recipe.yaml", AE_IFREG, "x"}, {"hard", AE_IFREG, "", "", "/etc/shadow"}}),
      {R"(entry "hard")", R"(hard link to "/etc/shadow")"});
  expect_refused(make_archive({{"dev/sda", AE_IFBLK}}), {R"(entry "dev/sda")", "a device"});
  expect_refused(make_archive({{"null", AE_IFCHR}}), {R"(entry "null")", "a device"});
  expect_refused(make_archive({{"fifo", AE_IFIFO}}), {R"(entry "fifo")", "FIFO"});
}

TEST(BundleArchiveTest, RefusesDuplicatesAndFileFolderClashes) {
  expect_refused(make_archive({{"a.txt", AE_IFREG, "1"}, {"./a.txt", AE_IFREG, "2"}}),
                 {R"(entry "./a.txt")", "appears twice"});
  expect_refused(make_archive({{"a", AE_IFREG, "1"}, {"a/b", AE_IFREG, "2"}}),
                 {R"(entry "a/b")", "is a file in the archive"});
  expect_refused(make_archive({{"a/b", AE_IFREG, "1"}, {"a", AE_IFREG, "2"}}),
                 {R"(entry "a")", "a folder of the same name"});
}

TEST(BundleArchiveTest, RefusesDamagedAndOversizedArchives) {
  expect_refused("not gzip at all", {"oci://r/x@sha256:1", "not a tar+gzip archive"});
  expect_refused(make_archive({}), {"oci://r/x@sha256:1", "holds no files"});
  std::string good = make_archive({{"a.txt", AE_IFREG, std::string(5000, 'a')}});
  expect_refused(good.substr(0, good.size() / 2), {"oci://r/x@sha256:1", "damaged"});
  expect_refused(make_archive({{"a", AE_IFREG, "1"}, {"b", AE_IFREG, "2"}, {"c", AE_IFREG, "3"}}),
                 {R"(entry "c")", "more than 2 files"}, UnpackLimits{2, 1000});
  expect_refused(make_archive({{"big", AE_IFREG, std::string(2000, 'x')}}),
                 {R"(entry "big")", "past 1000 bytes"}, UnpackLimits{10, 1000});
}

// ---- references ----

TEST(OciReferenceTest, ParsesHostPortRepositoryTagAndDigest) {
  OciReference r = parse_oci_reference("oci://host:5000/a/b:tag", "-o", false);
  EXPECT_EQ(r.registry, "host:5000");
  EXPECT_EQ(r.repository, "a/b");
  EXPECT_EQ(r.tag, "tag");
  EXPECT_EQ(r.digest, "");
  EXPECT_EQ(r.text(), "oci://host:5000/a/b:tag");

  const std::string d = "sha256:" + std::string(64, 'a');
  r = parse_oci_reference("oci://127.0.0.1:41000/gpufleet/bundles@" + d, "REF", true);
  EXPECT_EQ(r.registry, "127.0.0.1:41000");
  EXPECT_EQ(r.repository, "gpufleet/bundles");
  EXPECT_EQ(r.tag, "");
  EXPECT_EQ(r.digest, d);
  r = parse_oci_reference("oci://registry.example/x/y-z__w.v:v1.2_3@" + d, "REF", true);
  EXPECT_EQ(r.repository, "x/y-z__w.v");
  EXPECT_EQ(r.tag, "v1.2_3");
  EXPECT_EQ(r.text(), "oci://registry.example/x/y-z__w.v:v1.2_3@" + d);
  r = parse_oci_reference("oci://[::1]:5000/a:t", "REF", true);
  EXPECT_EQ(r.registry, "[::1]:5000");
  EXPECT_TRUE(is_oci_reference("oci://x/y:z"));
  EXPECT_FALSE(is_oci_reference("bundle/"));
}

void expect_bad_ref(const std::string& text, bool allow_digest, const std::string& words) {
  try {
    parse_oci_reference(text, "-o", allow_digest);
    ADD_FAILURE() << text << " accepted";
  } catch (const core::InvalidInput& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(words), std::string::npos) << words << " not in: " << msg;
    EXPECT_NE(msg.find("-o " + core::quoted(text)), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected oci://HOST[:PORT]/REPOSITORY:TAG"), std::string::npos) << msg;
  }
}

TEST(OciReferenceTest, BadReferencesNameTheProblem) {
  const std::string d = "sha256:" + std::string(64, 'a');
  expect_bad_ref("docker://host/a:t", true, "does not start with oci://");
  expect_bad_ref("oci://host", true, "no repository after the registry");
  expect_bad_ref("oci:///a:t", true, "no repository after the registry");
  expect_bad_ref("oci://host/a", true, "no tag");
  expect_bad_ref("oci://host:/a:t", true, R"(registry "host:" is not HOST or HOST:PORT)");
  expect_bad_ref("oci://host:50x/a:t", true, "is not HOST or HOST:PORT");
  expect_bad_ref("oci://host/A/b:t", true, R"(repository component "A" must be lower-case)");
  expect_bad_ref("oci://host/a//b:t", true, R"(repository component "")");
  expect_bad_ref("oci://host/a-:t", true, R"(repository component "a-")");
  expect_bad_ref("oci://host/a:-t", true, R"(tag "-t" is not)");
  expect_bad_ref("oci://host/a:", true, R"(tag "" is not)");
  expect_bad_ref("oci://host/a@sha256:abc", true, R"(digest "sha256:abc" is not sha256:)");
  expect_bad_ref("oci://host/a@md5:" + std::string(64, 'a'), true, "is not sha256:");
  expect_bad_ref("oci://host/a:t@" + d, false, "a push names a tag, not a digest");
}

// ---- credentials and manifest ----

std::string basic(const RegistryCredentials& c) { return c.username + ":" + c.password; }

TEST(OciCredentialsTest, ReadsDockerConfigAuths) {
  // "user:pa:ss" in base64; keys with a scheme and a path match the host too.
  std::string config = R"({"auths": {
      "https://other.example/v1/": {"auth": "b3RoZXI6eA=="},
      "http://127.0.0.1:5000/": {"auth": "dXNlcjpwYTpzcw=="},
      "reg.example:443": {"username": "robot", "password": "s3cret"},
      "idt.example": {"identitytoken": "rt-1"}}})";
  EXPECT_EQ(basic(registry_credentials(config, "c.json", "127.0.0.1:5000")), "user:pa:ss");
  EXPECT_EQ(basic(registry_credentials(config, "c.json", "reg.example:443")), "robot:s3cret");
  RegistryCredentials other = registry_credentials(config, "c.json", "other.example");
  EXPECT_EQ(basic(other), "other:x");
  EXPECT_EQ(other.source, R"(auths["https://other.example/v1/"] in c.json)");
  RegistryCredentials idt = registry_credentials(config, "c.json", "idt.example");
  EXPECT_EQ(idt.identity_token, "rt-1");
  EXPECT_TRUE(idt.username.empty());
  EXPECT_TRUE(registry_credentials(config, "c.json", "127.0.0.1:5001").empty());
  EXPECT_TRUE(registry_credentials("{}", "c.json", "x").empty());
  auto expect_bad = [](const std::string& text, const std::string& want) {
    try {
      registry_credentials(text, "c.json", "h");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const core::InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_bad(R"({"auths": {"h": {"auth": "%%%"}}})",
             "c.json: auths.h.auth: expected base64 of USER:PASSWORD");
  expect_bad(R"({"auths": {"h": {"identitytoken": 5}}})",
             "c.json: auths.h.identitytoken: expected a string, got \"5\"");
  expect_bad(R"({"auths": []})", "c.json: auths: expected a map of registry to credentials");
  expect_bad(R"({"credHelpers": {"h": true}})", "c.json: credHelpers.h: expected a string");
  expect_bad(R"({"credsStore": {}})", "c.json: credsStore: expected a string");
  EXPECT_THROW(registry_credentials("{not json", "c.json", "h"), core::InvalidInput);
}

// Credential helpers on PATH, as docker runs them: `docker-credential-NAME get`, the
// registry on stdin.
class CredentialHelperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("oci-helper-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    old_path_ = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
    ::setenv("PATH", (dir_.string() + ":" + old_path_).c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    fs::remove_all(dir_);
  }
  // A helper whose `get` runs `body` (bash; the registry read from stdin is in $r).
  void helper(const std::string& name, const std::string& body) {
    write(dir_ / ("docker-credential-" + name),
          "#!/usr/bin/env bash\n[[ $1 == get ]] || exit 9\nr=\"$(cat)\"\n" + body + "\n", true);
  }
  fs::path dir_;
  std::string old_path_;
};

TEST_F(CredentialHelperTest, CredHelpersThenCredsStoreThenAuths) {
  helper("pass", R"(printf '{"ServerURL":"%s","Username":"u-%s","Secret":"p"}' "$r" "$r")");
  helper("token", R"(echo '{"ServerURL":"x","Username":"<token>","Secret":"rt-9"}')");
  helper("none", R"(echo "credentials not found in native keychain"; exit 1)");
  const std::string config = R"({"credHelpers": {"https://a.example": "pass", "b.example": "token"},
      "credsStore": "none", "auths": {"c.example": {"auth": "Yzp4"}}})";
  RegistryCredentials a = registry_credentials(config, "c.json", "a.example");
  EXPECT_EQ(basic(a), "u-a.example:p");  // the registry arrived on stdin, without a newline
  EXPECT_EQ(a.source, R"(credHelpers["https://a.example"] in c.json)");
  RegistryCredentials b = registry_credentials(config, "c.json", "b.example");
  EXPECT_EQ(b.identity_token, "rt-9");
  EXPECT_TRUE(b.username.empty());
  // credsStore has none for c.example: auths answers; for d.example nobody does.
  RegistryCredentials c = registry_credentials(config, "c.json", "c.example");
  EXPECT_EQ(basic(c), "c:x");
  EXPECT_EQ(c.source, R"(auths["c.example"] in c.json)");
  EXPECT_TRUE(registry_credentials(config, "c.json", "d.example").empty());
  // credsStore answers for a registry it knows, over auths.
  EXPECT_EQ(basic(registry_credentials(
                R"({"credsStore": "pass", "auths": {"c.example": {"auth": "Yzp4"}}})", "c.json",
                "c.example")),
            "u-c.example:p");
}

TEST_F(CredentialHelperTest, MissingFailingAndGarbledHelpersNameTheFix) {
  helper("locked", R"(echo "keychain locked"; echo "details on stderr" >&2; exit 3)");
  helper("garbled", R"(echo "Username=u")");
  helper("slow", "sleep 30");
  auto expect_error = [](const std::string& config, const std::vector<std::string>& want,
                         std::chrono::seconds timeout = std::chrono::seconds(30)) {
    try {
      registry_credentials(config, "c.json", "r.example:5000", timeout);
      ADD_FAILURE() << "no error for " << config;
    } catch (const std::runtime_error& e) {
      for (const std::string& w : want)
        EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  };
  // A helper name is a suffix of docker-credential-, never a path.
  for (const char* bad : {R"({"credsStore": "../../bin/sh"})", R"({"credsStore": "a b"})",
                          R"({"credHelpers": {"r.example:5000": "x/y"}})"}) {
    try {
      registry_credentials(bad, "c.json", "r.example:5000");
      ADD_FAILURE() << "no error for " << bad;
    } catch (const core::InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("is not a program-name suffix"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(
      registry_credentials(R"({"credsStore": "gpufleet-absent"})", "c.json", "r.example:5000"),
      CredentialHelperError);
  expect_error(R"({"credsStore": "gpufleet-absent"})",
               {"registry r.example:5000: credential helper docker-credential-gpufleet-absent "
                "(credsStore in c.json) cannot be run",
                "install docker-credential-gpufleet-absent on PATH"});
  expect_error(
      R"({"credHelpers": {"r.example:5000": "locked"}})",
      {"credential helper docker-credential-locked (credHelpers[\"r.example:5000\"] in "
       "c.json) failed (exit status 3): \"keychain locked; details on stderr\"",
       "printf r.example:5000 | docker-credential-locked get", "docker login r.example:5000"});
  expect_error(R"({"credsStore": "garbled"})",
               {"docker-credential-garbled (credsStore in c.json) answered \"Username=u\", not "
                "the protocol's JSON"});
  expect_error(R"({"credsStore": "slow"})", {"failed (ran longer than 1 s)"},
               std::chrono::seconds(1));
}

TEST(OciManifestTest, IsStableAndDescribesOneBundleLayer) {
  const std::string d = "sha256:" + std::string(64, 'b');
  std::string m = bundle_manifest(d, 1234, {{"io.gpufleet.bundle.deployer", "helm"}});
  EXPECT_EQ(m, bundle_manifest(d, 1234, {{"io.gpufleet.bundle.deployer", "helm"}}));
  EXPECT_NE(m, bundle_manifest(d, 1235, {{"io.gpufleet.bundle.deployer", "helm"}}));
  const core::Value v = core::parse_json(m);
  const core::Value& layer = v.find("layers")->as_list().front();
  EXPECT_EQ(v.get_string({"artifactType"}), "application/vnd.gpufleet.bundle.v1");
  EXPECT_EQ(v.get_string({"mediaType"}), "application/vnd.oci.image.manifest.v1+json");
  EXPECT_EQ(v.get_string({"config", "mediaType"}), "application/vnd.oci.empty.v1+json");
  EXPECT_EQ(layer.get_string({"digest"}), d);
  EXPECT_EQ(layer.get_string({"mediaType"}), "application/vnd.gpufleet.bundle.layer.v1.tar+gzip");
  EXPECT_EQ(layer.find("size")->as_int(), 1234);
  EXPECT_EQ(v.get_string({"annotations", "io.gpufleet.bundle.deployer"}), "helm");
  EXPECT_EQ(m.find("created"), std::string::npos);  // no timestamp
}

}  // namespace
}  // namespace gpufleet::recipe
