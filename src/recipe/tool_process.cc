#include "recipe/tool_process.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/errors.h"
#include "core/file_reader.h"
#include "core/subprocess.h"
#include "core/text.h"

namespace gpufleet::recipe {

namespace {

std::string tail_of(const std::string& file) {
  std::string text;
  try {
    text = core::read_file(file);
  } catch (const std::exception&) {
    return {};
  }
  std::string_view t = core::trim(text);
  return std::string(t.size() > 2000 ? t.substr(t.size() - 2000) : t);
}

}  // namespace

std::string ToolTempDir::make(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base && *base ? base : "/tmp") + "/" + std::string(prefix) + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("cannot create a temporary directory: " +
                             std::string(std::strerror(errno)));
  return tmpl;
}

ToolTempDir::ToolTempDir(std::string_view prefix) : path(make(prefix)) {}

ToolTempDir::~ToolTempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string run_tool(const std::vector<std::string>& args, const std::string& err_file,
                     const std::string& what, std::string_view install_hint,
                     const ToolLimits& limits) {
  core::SubprocessOptions o;
  o.timeout = limits.timeout;
  o.max_output = limits.max_output;
  o.keep_tail = false;
  o.stderr_to = core::StderrTo::File;
  o.stderr_file = err_file;
  core::SubprocessResult r = core::run_subprocess(args, o);
  if (!r.started)
    throw std::runtime_error(what + ": " + r.error + "; " + std::string(install_hint));
  if (r.timed_out)
    throw std::runtime_error(what + ": '" + args[0] + "' ran longer than " +
                             std::to_string(limits.timeout.count()) + " s; stopped");
  if (r.output_overflow)
    throw std::runtime_error(what + ": '" + args[0] + "' wrote more than " +
                             std::to_string(limits.max_output >> 20) + " MiB; stopped");
  if (!r.ok()) {
    std::string err = tail_of(err_file);
    throw core::InvalidInput(what + ": '" + core::join(args, " ") + "' failed (" +
                             (r.signal != 0 ? "killed by signal " + std::to_string(r.signal)
                                            : "exit status " + std::to_string(r.exit_code)) +
                             ")" + (err.empty() ? "" : ": " + err));
  }
  return std::move(r.output);
}

}  // namespace gpufleet::recipe
