#include "certify/state_codec.h"

#include <zlib.h>

#include "core/base64.h"
#include "core/errors.h"
#include "core/input_limits.h"

namespace gpufleet::certify {

std::string gzip(std::string_view data) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip header, so `kubectl get cm -o jsonpath=... | base64 -d | gunzip`
  // reads it.
  if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK)
    throw std::runtime_error("zlib: cannot start deflate");
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate did not finish");
  return out;
}

std::string gunzip(std::string_view data, std::string_view what) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw core::InvalidInput(std::string(what) + ": zlib cannot start inflate");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  // The cap is checked before each chunk is kept: a corrupt or hostile object cannot make
  // the controller allocate more than the limit.
  const std::size_t cap = core::input_limits().max_inflated_bytes;
  std::string out;
  char buf[16384];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    std::size_t n = sizeof buf - zs.avail_out;
    if (out.size() + n > cap) {
      inflateEnd(&zs);
      throw core::InvalidInput(std::string(what) + ": gzip data inflates past the limit of " +
                               core::describe_bytes(cap) +
                               " (raise it with GPUFLEET_MAX_INPUT_BYTES if this state is real)");
    }
    out.append(buf, n);
  }
  inflateEnd(&zs);
  if (rc != Z_STREAM_END)
    throw core::InvalidInput(std::string(what) +
                             ": gzip data is corrupt (delete the ConfigMap to restart the "
                             "category, or restore it)");
  return out;
}

EncodedState encode_state(std::string_view key, const std::string& json) {
  EncodedState e;
  if (json.size() > kCompressAbove) {
    std::string z = gzip(json);
    if (z.size() < json.size()) {
      e.binary_data[std::string(key) + ".gz"] = core::base64_encode(z);
      return e;
    }
  }
  e.data[std::string(key)] = json;
  return e;
}

std::optional<std::string> decode_state(const core::Value& cm, std::string_view key) {
  const std::string gz = std::string(key) + ".gz";
  if (const core::Value* b = cm.get({"binaryData", gz}); b != nullptr && b->is_string()) {
    std::string what =
        "ConfigMap " + std::string(cm.get_string({"metadata", "name"})) + " binaryData." + gz;
    auto bytes = core::base64_decode(b->as_string());
    if (!bytes) throw core::InvalidInput(what + ": is not valid base64");
    return gunzip(*bytes, what);
  }
  if (const core::Value* d = cm.get({"data", std::string(key)}); d != nullptr && d->is_string())
    return d->as_string();
  return std::nullopt;
}

}  // namespace gpufleet::certify
