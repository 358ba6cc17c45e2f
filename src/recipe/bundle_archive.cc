#include "recipe/bundle_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "core/errors.h"
#include "core/text.h"

namespace gpufleet::recipe {
namespace {

namespace fs = std::filesystem;

struct ArchiveWriteDeleter {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct ArchiveReadDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

std::string archive_error(archive* a) {
  const char* s = archive_error_string(a);
  return s != nullptr ? s : "unknown libarchive error";
}

la_ssize_t append_to_string(archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

std::string read_whole_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string() + ": " + std::strerror(errno));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("cannot read " + p.string());
  return data;
}

// The entry's path made relative and checked: "" for the archive root ("." or "./").
std::string safe_relative_path(const std::string& where, const char* raw) {
  if (raw == nullptr || *raw == '\0')
    throw core::InvalidInput(where + ": an entry has an empty path; the archive is damaged");
  std::string path = raw;
  auto refuse = [&](const std::string& why) {
    throw core::InvalidInput(where + ": entry " + core::quoted(path) + ": " + why +
                             "; refusing to unpack (a bundle holds relative paths only)");
  };
  if (path.front() == '/') refuse("absolute path");
  std::string out;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part = std::string_view(path).substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") refuse("'..' leads out of the target directory");
    // Refused here, as input, rather than failing later as an I/O error (ENAMETOOLONG).
    if (part.size() > 255) refuse("a name longer than 255 bytes");
    if (!out.empty()) out += '/';
    out += part;
  }
  if (out.size() > 1024) refuse("a path longer than 1024 bytes");
  return out;
}

// Creates the folders of `rel` below `root` (never through a link: only this code writes
// under root, and it writes no links).
void make_parents(const fs::path& root, const std::string& rel, const std::string& where) {
  fs::path cur = root;
  fs::path parent = fs::path(rel).parent_path();
  for (const fs::path& part : parent) {
    cur /= part;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error(where + ": cannot create " + cur.string() + ": " +
                               std::strerror(errno));
    struct stat st {};
    if (::lstat(cur.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw core::InvalidInput(where + ": entry " + core::quoted(rel) + ": its folder " +
                               core::quoted(part.string()) + " is a file in the archive");
  }
}

}  // namespace

std::string pack_bundle_dir(const std::string& dir) {
  std::vector<std::pair<std::string, fs::path>> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(dir + ": not a directory");
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    fs::file_status st = it->symlink_status();
    std::string rel = fs::relative(it->path(), dir).generic_string();
    if (fs::is_directory(st)) continue;
    if (!fs::is_regular_file(st)) {
      throw std::runtime_error(dir + ": " + rel +
                               " is not a regular file (a link or a device); a bundle holds "
                               "regular files only");
    }
    files.emplace_back(rel, it->path());
  }
  if (ec) throw std::runtime_error("cannot list " + dir + ": " + ec.message());
  // Byte order, whatever order the directory returns its entries in.
  std::sort(files.begin(), files.end());

  std::string out;
  std::unique_ptr<archive, ArchiveWriteDeleter> a(archive_write_new());
  // pax only where ustar cannot hold a field (long paths); no atime/ctime, no user names.
  // Without "!timestamp" libarchive writes the current time into the gzip header.
  if (archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK ||
      archive_write_add_filter_gzip(a.get()) != ARCHIVE_OK ||
      archive_write_set_options(a.get(), "gzip:!timestamp,gzip:compression-level=6") !=
          ARCHIVE_OK ||
      // No zero padding after the gzip stream (tar's 10 KiB blocking is for tapes).
      archive_write_set_bytes_in_last_block(a.get(), 1) != ARCHIVE_OK ||
      archive_write_open(a.get(), &out, nullptr, append_to_string, nullptr) != ARCHIVE_OK) {
    throw std::runtime_error("libarchive: " + archive_error(a.get()));
  }
  for (const auto& [rel, path] : files) {
    std::string data = read_whole_file(path);
    fs::perms perms = fs::status(path, ec).permissions();
    bool exec = (perms & fs::perms::owner_exec) != fs::perms::none;
    std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), rel.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), exec ? 0755 : 0644);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(data.size()));
    archive_entry_set_mtime(e.get(), 0, 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK ||
        (!data.empty() && archive_write_data(a.get(), data.data(), data.size()) !=
                              static_cast<la_ssize_t>(data.size()))) {
      throw std::runtime_error("libarchive: " + rel + ": " + archive_error(a.get()));
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK)
    throw std::runtime_error("libarchive: " + archive_error(a.get()));
  return out;
}

std::size_t unpack_bundle_archive(const std::string& archive_bytes, const std::string& dir,
                                  const std::string& where, const UnpackLimits& limits) {
  std::error_code ec;
  fs::path target = fs::absolute(dir, ec).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "bundle/"
  if (fs::exists(target, ec) && (!fs::is_directory(target, ec) || !fs::is_empty(target, ec))) {
    throw core::InvalidInput(core::quoted(dir) +
                             " exists and is not an empty directory; give a new or empty "
                             "directory so that no file of another bundle mixes in");
  }
  fs::path parent = target.parent_path();
  if (!fs::is_directory(parent, ec))
    throw core::InvalidInput(core::quoted(dir) + ": its parent folder does not exist");
  // Unpacked beside the target and renamed into place, so a refused archive leaves nothing.
  std::string tmpl = (parent / ("." + target.filename().string() + ".partial-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("cannot create a folder beside " + dir + ": " + std::strerror(errno));
  fs::path staging = tmpl;
  struct Cleanup {
    fs::path p;
    bool armed = true;
    ~Cleanup() {
      std::error_code ignored;
      if (armed) fs::remove_all(p, ignored);
    }
  } cleanup{staging};

  // libarchive reads data without a known filter as is: insist on gzip's magic.
  if (archive_bytes.size() < 2 || archive_bytes[0] != '\x1f' || archive_bytes[1] != '\x8b')
    throw core::InvalidInput(where + ": not a tar+gzip archive (no gzip header)");
  std::unique_ptr<archive, ArchiveReadDeleter> a(archive_read_new());
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), archive_bytes.data(), archive_bytes.size()) != ARCHIVE_OK) {
    throw core::InvalidInput(where +
                             ": damaged or not a tar+gzip archive: " + archive_error(a.get()));
  }
  std::size_t files = 0, total = 0;
  std::set<std::string> seen;
  archive_entry* e = nullptr;
  for (;;) {
    int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
      throw core::InvalidInput(where + ": damaged archive: " + archive_error(a.get()));
    std::string rel = safe_relative_path(where, archive_entry_pathname(e));
    const std::string shown = core::quoted(archive_entry_pathname(e));
    auto refuse = [&](const std::string& why) {
      throw core::InvalidInput(where + ": entry " + shown + ": " + why +
                               "; refusing to unpack (a bundle holds regular files only)");
    };
    if (archive_entry_hardlink(e) != nullptr)
      refuse(std::string("hard link to ") + core::quoted(archive_entry_hardlink(e)));
    mode_t type = archive_entry_filetype(e);
    if (type == AE_IFLNK) {
      const char* to = archive_entry_symlink(e);
      refuse(std::string("symbolic link to ") + core::quoted(to != nullptr ? to : ""));
    }
    if (type == AE_IFDIR) {
      if (rel.empty()) continue;
      make_parents(staging, rel + "/x", where);
      continue;
    }
    if (type != AE_IFREG) refuse("a device, FIFO or socket");
    if (rel.empty()) refuse("a file without a name");
    if (!seen.insert(rel).second) refuse("appears twice");
    if (++files > limits.max_files)
      refuse("more than " + std::to_string(limits.max_files) + " files in the archive");
    make_parents(staging, rel, where);
    fs::path p = staging / rel;
    mode_t mode = (archive_entry_perm(e) & 0100) != 0 ? 0755 : 0644;
    int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == EEXIST || errno == EISDIR) refuse("a folder of the same name exists");
      throw std::runtime_error(where + ": cannot create " + p.string() + ": " +
                               std::strerror(errno));
    }
    struct Fd {
      int fd;
      ~Fd() { ::close(fd); }
    } closer{fd};
    char buf[65536];
    for (;;) {
      la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
      if (n < 0) refuse("damaged data: " + archive_error(a.get()));
      if (n == 0) break;
      total += static_cast<std::size_t>(n);
      if (total > limits.max_total_bytes)
        refuse("the archive unpacks past " + std::to_string(limits.max_total_bytes) + " bytes");
      for (la_ssize_t off = 0; off < n;) {
        ssize_t w = ::write(fd, buf + off, static_cast<std::size_t>(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0)
          throw std::runtime_error(where + ": cannot write " + p.string() + ": " +
                                   std::strerror(errno));
        off += w;
      }
    }
    if (::fchmod(fd, mode) != 0)
      throw std::runtime_error(where + ": cannot set the mode of " + p.string());
  }
  if (files == 0) throw core::InvalidInput(where + ": the archive holds no files");
  ::chmod(staging.c_str(), 0755);
  // rename(2) replaces an empty directory, and fails if someone filled it meanwhile.
  if (::rename(staging.c_str(), target.c_str()) != 0)
    throw std::runtime_error("cannot move the unpacked bundle to " + dir + ": " +
                             std::strerror(errno));
  cleanup.armed = false;
  return files;
}

}  // namespace gpufleet::recipe
