#include "core/gzip.h"

#include <zlib.h>

#include <stdexcept>

#include "core/errors.h"
#include "core/input_limits.h"

namespace gpufleet::core {

std::string gzip(std::string_view data) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip header and trailer, not a bare zlib stream.
  if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    throw std::runtime_error("zlib: cannot start deflate");
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  return out;
}

std::string gunzip(std::string_view data, std::string_view what,
                   std::string_view fix_when_too_large, std::string_view fix_when_corrupt) {
  auto with = [](std::string_view fix) {
    return fix.empty() ? std::string() : " (" + std::string(fix) + ")";
  };
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw InvalidInput(std::string(what) + ": zlib cannot start inflate");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  // A gzip bomb inflates ~1000x: the cap is checked before each chunk is kept.
  const std::size_t cap = input_limits().max_inflated_bytes;
  std::string out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    const std::size_t n = sizeof buf - zs.avail_out;
    if (out.size() + n > cap) {
      inflateEnd(&zs);
      throw InvalidInput(std::string(what) + ": gzip data inflates past the limit of " +
                         describe_bytes(cap) + with(fix_when_too_large));
    }
    out.append(buf, n);
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END)
    throw InvalidInput(std::string(what) + ": gzip data is corrupt" + with(fix_when_corrupt));
  return out;
}

}  // namespace gpufleet::core
