#include "recipe/bundle_verify.h"

#include <filesystem>
#include <set>
#include <sstream>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/sha256.h"
#include "recipe/sshsig.h"

namespace gpufleet::recipe {

namespace fs = std::filesystem;

namespace {

// Bounded by the input limit (64 MiB by default): room for chart archives, not for a
// hostile file to exhaust memory.
std::string read_bundle_file(const fs::path& p) { return core::read_file(p.string()); }

VerifyReport fail(VerifyReport r, std::string file, std::string reason) {
  r.ok = false;
  r.first_bad = std::move(file);
  r.reason = std::move(reason);
  return r;
}

}  // namespace

VerifyReport verify_bundle(const std::string& dir, const std::string& public_key_file) {
  SshPublicKey key = parse_ssh_public_key(core::read_file(public_key_file), public_key_file);
  VerifyReport report;
  report.signer = ssh_fingerprint(key);
  fs::path root(dir);
  std::error_code ec;
  if (!fs::is_regular_file(root / "checksums.txt", ec)) {
    throw core::InvalidInput(dir +
                             " has no checksums.txt: not a gpufleet bundle (gpufleet bundle "
                             "-o writes one)");
  }
  std::string checksums = read_bundle_file(root / "checksums.txt");
  if (!fs::is_regular_file(root / kSignatureFile, ec)) {
    return fail(report, std::string(kSignatureFile),
                "missing: the bundle is not signed (gpufleet bundle --sign-key KEY signs it)");
  }
  std::string why = sshsig_verify(checksums, read_bundle_file(root / kSignatureFile), key,
                                  kBundleSignatureNamespace);
  if (!why.empty()) {
    // A signature that does not match means checksums.txt itself was changed.
    bool tampered = why.rfind("the signature does not match", 0) == 0;
    return fail(report, tampered ? "checksums.txt" : std::string(kSignatureFile), why);
  }
  std::set<std::string> listed = {"checksums.txt", std::string(kSignatureFile)};
  std::istringstream lines(checksums);
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    ++n;
    if (line.size() < 67 || line.substr(64, 2) != "  ") {
      return fail(report, "checksums.txt",
                  "line " + std::to_string(n) + " is not '<sha256>  <path>'");
    }
    std::string hash = line.substr(0, 64), path = line.substr(66);
    fs::path p = root / path;
    if (path.find("..") != std::string::npos || path.front() == '/') {
      return fail(report, path, "listed path leaves the bundle");
    }
    listed.insert(path);
    if (!fs::is_regular_file(p, ec)) return fail(report, path, "missing");
    if (core::sha256_hex(read_bundle_file(p)) != hash) {
      return fail(report, path, "changed: its SHA-256 differs from checksums.txt");
    }
    ++report.files;
  }
  // A file the signer never saw (a script dropped in later) fails too.
  std::set<std::string> extra;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_directory()) continue;
    std::string rel = fs::relative(e.path(), root).generic_string();
    if (!listed.count(rel)) extra.insert(rel);
  }
  if (!extra.empty()) {
    return fail(report, *extra.begin(), "not listed in checksums.txt (added after signing)");
  }
  report.ok = true;
  return report;
}

}  // namespace gpufleet::recipe
