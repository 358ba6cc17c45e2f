// `gpufleet verify DIR --key KEY.pub`: offline check that a bundle is exactly what the holder
// of the key signed; names the first file that is not.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/command.h"
#include "recipe/bundle_verify.h"

namespace gpufleet::cli {
namespace {

struct VerifyFlags {
  std::string dir;
  std::string key;
};

void run_verify(const VerifyFlags& f) {
  recipe::VerifyReport r = recipe::verify_bundle(f.dir, f.key);
  if (!r.ok) {
    std::cerr << "gpufleet verify: " << f.dir << ": " << r.first_bad << ": " << r.reason << "\n";
    set_exit_code(kExitInvalid);
    return;
  }
  std::cout << "verified " << f.dir << ": signature by " << r.signer << " over checksums.txt, "
            << r.files << " files match, no file added\n";
}

void setup_verify(CLI::App& root) {
  auto flags = std::make_shared<VerifyFlags>();
  auto* cmd = root.add_subcommand(
      "verify",
      "Verify a signed bundle offline: the SSH Ed25519 signature checksums.txt.sig over\n"
      "checksums.txt, every listed file's SHA-256, no extra file. Exit 0 when it holds, 4\n"
      "naming the first bad file.");
  cmd->add_option("dir", flags->dir, "bundle directory")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--key", flags->key, "the signer's SSH public key (.pub)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->callback([flags] { run_verify(*flags); });
}

const CommandRegistration kVerify(setup_verify);

}  // namespace
}  // namespace gpufleet::cli
