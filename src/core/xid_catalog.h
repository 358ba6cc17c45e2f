// The Xid (GPU) and SXid (NVSwitch) catalog: code -> name, severity, NVIDIA's recommended
// action and the driver's message. The data is data/xid/catalog.yaml, compiled in; the
// simulator prints lines from it and sentinel reads them with it, so both agree on codes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::core {

enum class XidSeverity : std::uint8_t { Info, Warning, Critical };
enum class XidAction : std::uint8_t {
  Ignore,
  RestartApp,
  ResetGpu,
  RebootNode,
  Decode,
  FollowAction
};
// What the simulator does to a GPU's state when it reports the code.
enum class XidEffect : std::uint8_t {
  None,
  FallenOff,     // the GPU leaves the bus
  DoubleBitEcc,  // an uncorrected ECC error, and a row remap pending (Xid 63)
  RowRemapPending,
  RowRemapFailure,
  SingleBitEccBurst,  // a burst of corrected ECC errors
  ContainedEcc,       // one uncorrected ECC error
  NvlinkDown,         // one NVLink fewer active
};

struct XidInfo {
  int code = 0;
  std::string name;  // "GPU has fallen off the bus"
  XidSeverity severity = XidSeverity::Info;
  XidAction action = XidAction::Ignore;
  XidEffect effect = XidEffect::None;
  std::string message;  // with {detail} placeholders, see fill_xid_message
};

struct SXidInfo {
  int code = 0;
  bool fatal = false;  // takes the switch's links out until a reset
  std::string text;    // the error after "Link NN "
};

// The placeholders a message may hold (data/xid/catalog.yaml explains each).
inline constexpr std::string_view kXidPlaceholders[] = {
    "gpc", "tpc", "sm",   "channel", "client", "va",   "physaddr", "ucode",
    "pc",  "row", "link", "info",    "dram",   "from", "to"};

class XidCatalog {
 public:
  // Reads a catalog document strictly (unknown keys and values, unknown placeholders, codes
  // listed twice are errors naming the field, with line:column). Throws core::InvalidInput.
  static XidCatalog parse(std::string_view yaml, std::string_view source);
  // The compiled-in catalog, read once (thread-safe).
  static const XidCatalog& builtin();

  // nullptr when the code is not in the catalog.
  [[nodiscard]] const XidInfo* find(int code) const noexcept;
  [[nodiscard]] const SXidInfo* find_sxid(int code) const noexcept;
  [[nodiscard]] const std::vector<XidInfo>& xids() const noexcept { return xids_; }
  [[nodiscard]] const std::vector<SXidInfo>& sxids() const noexcept { return sxids_; }

 private:
  std::vector<XidInfo> xids_;    // sorted by code
  std::vector<SXidInfo> sxids_;  // sorted by code
};

std::string_view severity_name(XidSeverity s) noexcept;
std::string_view action_name(XidAction a) noexcept;

// `message` with every {name} replaced by value(name).
std::string fill_xid_message(std::string_view message,
                             const std::function<std::string(std::string_view)>& value);

}  // namespace gpufleet::core
