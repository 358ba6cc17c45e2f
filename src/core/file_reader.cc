#include "core/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errors.h"

namespace gpufleet::core {

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  throw InvalidInput(path + ": " + what);
}

// Everything but a regular file is refused by its type, so the message says what it is.
void check_type(const std::string& path, const struct stat& st) {
  switch (st.st_mode & S_IFMT) {
    case S_IFREG: return;
    case S_IFDIR: refuse(path, "is a directory; give a file");
    case S_IFIFO: refuse(path, "is a FIFO (named pipe); give a regular file");
    case S_IFCHR: refuse(path, "is a character device; give a regular file");
    case S_IFBLK: refuse(path, "is a block device; give a regular file");
    case S_IFSOCK: refuse(path, "is a socket; give a regular file");
    default: refuse(path, "is not a regular file; give a regular file");
  }
}

std::string open_error(int err) {
  switch (err) {
    case ENOENT: return "does not exist; check the path";
    case EACCES: return "cannot be read: permission denied";
    case ENOTDIR: return "does not exist (a part of the path is not a directory); check the path";
    case ELOOP: return "cannot be read: too many levels of symbolic links";
    default: return std::string("cannot be read: ") + std::strerror(err);
  }
}

std::string over_limit(const std::string& size, const InputLimits& limits) {
  return size + ", over the input limit of " + describe_bytes(limits.max_bytes) +
         "; raise it with GPUFLEET_MAX_INPUT_BYTES (e.g. GPUFLEET_MAX_INPUT_BYTES=256Mi) if the "
         "file is meant to be this big";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::string read_file(const std::string& path, const InputLimits& limits) {
  if (path.empty()) throw InvalidInput("empty file name: give the path of a file");
  // stat first: the type is known without opening, so a device is never opened at all.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) refuse(path, open_error(errno));
  check_type(path, st);
  if (static_cast<std::uint64_t>(st.st_size) > limits.max_bytes) {
    refuse(path, over_limit("is " + describe_bytes(static_cast<std::size_t>(st.st_size)), limits));
  }
  // O_NONBLOCK: if the path was swapped for a FIFO since stat(), open() still returns at
  // once, and fstat() below refuses it. O_NOCTTY: never become a terminal's controller.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) refuse(path, open_error(errno));
  if (::fstat(fd.get(), &st) != 0) refuse(path, open_error(errno));
  check_type(path, st);

  std::string out;
  out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      refuse(path, std::string("cannot be read: ") + std::strerror(errno));
    }
    if (n == 0) break;
    // The file grew after fstat(): the cap still holds.
    if (out.size() + static_cast<std::size_t>(n) > limits.max_bytes) {
      refuse(path, over_limit("grew while being read", limits));
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace gpufleet::core
