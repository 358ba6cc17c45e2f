// Deterministic pseudo-random numbers. The simulator never uses std:: distributions (their
// output differs between standard libraries): a seed must give byte-identical runs.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpufleet::sim {

// SplitMix64: tiny, fast, statistically good enough for jitter and identifiers.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept : state_(seed) {}

  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  std::uint64_t below(std::uint64_t n) noexcept { return next() % n; }
  // Uniform in [0, 1).
  double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double between(double lo, double hi) noexcept { return lo + (hi - lo) * unit(); }

 private:
  std::uint64_t state_;
};

// A seed for one named thing (a node, a pod, a run) derived from the fleet seed, so that
// adding a node never changes the numbers of the others.
inline std::uint64_t derive_seed(std::uint64_t seed, std::string_view name) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ seed;  // FNV-1a, keyed by the seed
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  Rng mix(h);
  return mix.next();
}

// A version-4-shaped UUID drawn from `rng` (lower-case, 8-4-4-4-12).
inline void append_uuid(Rng& rng, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::uint64_t hi = rng.next();
  std::uint64_t lo = rng.next();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) out.push_back('-');
    std::uint64_t word = i < 16 ? hi : lo;
    int shift = 60 - 4 * (i % 16);
    out.push_back(kHex[(word >> shift) & 0xf]);
  }
}

}  // namespace gpufleet::sim
