// A bundle directory as one reproducible tar+gzip stream (the layer `bundle -o oci://` pushes)
// and back. Packing depends only on the files' relative paths, bytes and executable bit:
// entries sorted by path, mtime 0, uid/gid 0 without names, modes 0644/0755, no gzip
// timestamp or file name, so the same bundle gives the same bytes (and OCI digest) with the
// same gpufleet build. Unpacking trusts nothing in the archive: see unpack_bundle_archive.
#pragma once

#include <cstddef>
#include <string>

namespace gpufleet::recipe {

// Regular files only (a bundle has no links, devices or empty folders): anything else under
// `dir` is refused with an error naming it. Throws std::runtime_error on I/O errors.
std::string pack_bundle_dir(const std::string& dir);

struct UnpackLimits {
  std::size_t max_files = 100'000;
  std::size_t max_total_bytes = std::size_t{4} << 30;
};

// Unpacks a tar+gzip stream into `dir`, which must not exist or be empty; on any error
// nothing is left in `dir`. Accepts regular files and folders with relative paths only:
// absolute paths, `..`, symbolic and hard links, devices, FIFOs, duplicate entries and
// archives over `limits` are refused with core::InvalidInput naming `where` and the entry.
// Returns the number of files written.
std::size_t unpack_bundle_archive(const std::string& archive, const std::string& dir,
                                  const std::string& where, const UnpackLimits& limits = {});

}  // namespace gpufleet::recipe
