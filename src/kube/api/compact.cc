#include "kube/api/compact.h"

#include <algorithm>
#include <cstring>

#include "core/errors.h"
#include "kube/api/compact_tape.h"

namespace gpufleet::kube {

// ---- StringInterner ----

namespace {

std::atomic<std::uint64_t> next_interner_uid{1};

// A direct-mapped cache of (string -> id) per thread, for one interner at a time. Slots point
// into the interner's arena, which never moves or shrinks while the interner lives.
struct InternCache {
  static constexpr std::size_t kSlots = 4096;  // 64 KiB per thread
  struct Slot {
    const char* data = nullptr;
    std::uint32_t size = 0;
    std::uint32_t id = 0;
  };
  std::uint64_t owner = 0;
  std::array<Slot, kSlots> slots{};
};

thread_local InternCache intern_cache;

std::uint64_t load8(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Only picks a slot (a collision costs a miss, never a wrong answer): the length and three
// words sampled from the start, middle and end, mixed.
std::size_t slot_of(std::string_view s) noexcept {
  std::uint64_t h = s.size() * 0x9E3779B97F4A7C15ULL;
  if (s.size() >= 8) {
    h ^= load8(s.data()) * 0xC2B2AE3D27D4EB4FULL;
    h ^= load8(s.data() + (s.size() - 8) / 2) * 0x165667B19E3779F9ULL;
    h ^= load8(s.data() + s.size() - 8) * 0x27D4EB2F165667C5ULL;
  } else {
    std::uint64_t v = 0;
    std::memcpy(&v, s.data(), s.size());
    h ^= v * 0xC2B2AE3D27D4EB4FULL;
  }
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 32;
  return static_cast<std::size_t>(h) & (InternCache::kSlots - 1);
}

}  // namespace

StringInterner::StringInterner(std::size_t max_strings, std::size_t max_bytes)
    : max_strings_(std::min(max_strings, kChunkEntries * 1024)),
      max_bytes_(max_bytes),
      uid_(next_interner_uid.fetch_add(1)) {}

std::uint32_t StringInterner::intern_cached(std::string_view s) {
  if (s.size() > kMaxLength) return kNone;
  InternCache& cache = intern_cache;
  if (cache.owner != uid_) {
    cache.slots.fill({});
    cache.owner = uid_;
  }
  InternCache::Slot& slot = cache.slots[slot_of(s)];
  if (slot.data != nullptr && slot.size == s.size() &&
      std::memcmp(slot.data, s.data(), s.size()) == 0) {
    return slot.id;
  }
  std::uint32_t id = intern(s);
  if (id != kNone) slot = {view(id).data(), static_cast<std::uint32_t>(s.size()), id};
  return id;
}

StringInterner::~StringInterner() {
  for (auto& c : chunks_) delete[] c.load();
}

std::uint32_t StringInterner::intern(std::string_view s) {
  if (s.size() > kMaxLength) return kNone;
  {
    std::shared_lock lock(mu_);
    if (auto it = ids_.find(s); it != ids_.end()) return it->second;
  }
  std::unique_lock lock(mu_);
  if (auto it = ids_.find(s); it != ids_.end()) return it->second;
  if (next_ >= max_strings_ || bytes_ + s.size() > max_bytes_) return kNone;
  if (arena_.empty() || arena_used_ + s.size() > kArenaBlock) {
    arena_.push_back(std::make_unique<char[]>(kArenaBlock));
    arena_used_ = 0;
  }
  char* at = arena_.back().get() + arena_used_;
  if (!s.empty()) std::memcpy(at, s.data(), s.size());
  arena_used_ += s.size();
  bytes_ += s.size();
  std::uint32_t id = next_++;
  std::atomic<Entry*>& chunk = chunks_[id / kChunkEntries];
  if (chunk.load(std::memory_order_relaxed) == nullptr) {
    chunk.store(new Entry[kChunkEntries], std::memory_order_release);
  }
  chunk.load(std::memory_order_relaxed)[id % kChunkEntries] = {
      at, static_cast<std::uint32_t>(s.size())};
  ids_.emplace(std::string_view(at, s.size()), id);
  return id;
}

std::string_view StringInterner::view(std::uint32_t id) const noexcept {
  const Entry* chunk = chunks_[id / kChunkEntries].load(std::memory_order_acquire);
  const Entry& e = chunk[id % kChunkEntries];
  return {e.data, e.size};
}

std::size_t StringInterner::size() const {
  std::shared_lock lock(mu_);
  return next_;
}

std::size_t StringInterner::heap_bytes() const {
  std::shared_lock lock(mu_);
  std::size_t chunks = (next_ + kChunkEntries - 1) / kChunkEntries;
  // Hash map: one node (key view + id + next + hash) per string plus the bucket array.
  return arena_.size() * kArenaBlock + chunks * kChunkEntries * sizeof(Entry) + ids_.size() * 40 +
         ids_.bucket_count() * sizeof(void*);
}

StringInterner& StringInterner::shared() {
  static StringInterner* interner = new StringInterner();  // never destroyed: caches outlive main
  return *interner;
}

using namespace tape;

bool tape::unique_valued_key(std::string_view key) noexcept {
  static constexpr std::string_view kKeys[] = {"name",
                                               "uid",
                                               "resourceVersion",
                                               "creationTimestamp",
                                               "deletionTimestamp",
                                               "lastHeartbeatTime",
                                               "lastTransitionTime",
                                               "lastProbeTime",
                                               "lastUpdateTime",
                                               "timeAdded",
                                               "startedAt",
                                               "finishedAt",
                                               "startTime",
                                               "providerID",
                                               "bootID",
                                               "machineID",
                                               "systemUUID",
                                               "address",
                                               "podCIDR",
                                               "podIP",
                                               "hostIP",
                                               "ip",
                                               "containerID",
                                               "imageID",
                                               "message",
                                               "kubernetes.io/hostname",
                                               "continue",
                                               "generateName",
                                               "selfLink",
                                               "time"};
  return std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys);
}

namespace {

class Encoder {
 public:
  Encoder(StringInterner& interner, std::string& out) : interner_(interner), out_(out) {}

  void value(const core::Value& v, bool intern_strings) {
    switch (v.kind()) {
      case core::Kind::Null: out_.push_back(kNull); break;
      case core::Kind::Bool: out_.push_back(v.as_bool() ? kTrue : kFalse); break;
      case core::Kind::Int: {
        std::int64_t i = v.as_int();
        out_.push_back(kInt);
        put_varint(out_, zigzag(i));
        break;
      }
      case core::Kind::Uint:
        out_.push_back(kUint);
        put_varint(out_, v.as_uint());
        break;
      case core::Kind::Double: {
        double d = v.as_double();
        out_.push_back(kDouble);
        char b[8];
        std::memcpy(b, &d, 8);
        out_.append(b, 8);
        break;
      }
      case core::Kind::String: string(v.as_string(), intern_strings); break;
      case core::Kind::Bytes: {
        const std::string& b = v.as_bytes().data;
        out_.push_back(kBytes);
        put_varint(out_, b.size());
        out_.append(b);
        break;
      }
      case core::Kind::List: {
        const core::List& l = v.as_list();
        out_.push_back(kList);
        put_varint(out_, l.size());
        std::size_t body = out_.size();
        for (const core::Value& e : l) value(e, intern_strings);
        insert_length(body);
        break;
      }
      case core::Kind::Map: {
        const core::Map& m = v.as_map();
        out_.push_back(kMap);
        put_varint(out_, m.size());
        std::size_t body = out_.size();
        for (const core::MapEntry& e : m) {
          std::uint32_t id = interner_.intern_cached(e.key);
          if (id != StringInterner::kNone) {
            put_varint(out_, std::uint64_t{id} << 1);
          } else {
            put_varint(out_, (std::uint64_t{e.key.size()} << 1) | 1);
            out_.append(e.key);
          }
          value(e.value, !unique_valued_key(e.key));
        }
        insert_length(body);
        break;
      }
    }
  }

 private:
  void string(const std::string& s, bool intern) {
    std::uint32_t id = intern ? interner_.intern_cached(s) : StringInterner::kNone;
    if (id != StringInterner::kNone) {
      out_.push_back(kInterned);
      put_varint(out_, id);
    } else {
      out_.push_back(kInline);
      put_varint(out_, s.size());
      out_.append(s);
    }
  }
  // Writes the body length in front of the body that starts at `body`.
  void insert_length(std::size_t body) {
    std::uint64_t len = out_.size() - body;
    std::string v;
    put_varint(v, len);
    out_.insert(body, v);
  }

  StringInterner& interner_;
  std::string& out_;
};

// Skips the value at p; returns the position after it.
const std::uint8_t* skip(const std::uint8_t* p) noexcept {
  switch (*p++) {
    case kNull:
    case kFalse:
    case kTrue: return p;
    case kInt:
    case kUint:
    case kInterned: get_varint(p); return p;
    case kDouble: return p + 8;
    case kInline:
    case kBytes: {
      std::uint64_t n = get_varint(p);
      return p + n;
    }
    default: {  // List, Map
      get_varint(p);
      std::uint64_t len = get_varint(p);
      return p + len;
    }
  }
}

std::string_view read_key(const StringInterner* interner, const std::uint8_t*& p) noexcept {
  std::uint64_t k = get_varint(p);
  if ((k & 1) == 0) return interner->view(static_cast<std::uint32_t>(k >> 1));
  std::string_view s(reinterpret_cast<const char*>(p), k >> 1);
  p += k >> 1;
  return s;
}

}  // namespace

std::shared_ptr<const CompactObject> CompactObject::encode(const core::Value& v,
                                                           StringInterner& interner) {
  thread_local std::string scratch;
  scratch.clear();
  Encoder(interner, scratch).value(v, true);
  if (scratch.size() > 0xffffffffU) {
    throw core::InvalidInput("object too large for the compact cache form (" +
                             std::to_string(scratch.size()) + " bytes; at most 4 GiB)");
  }
  auto tape = std::make_unique<std::uint8_t[]>(scratch.size());
  std::memcpy(tape.get(), scratch.data(), scratch.size());
  auto size = static_cast<std::uint32_t>(scratch.size());
  if (scratch.capacity() > (std::size_t{1} << 20)) std::string().swap(scratch);  // bounded
  return std::make_shared<const CompactObject>(&interner, std::move(tape), size);
}

// ---- CompactView ----

core::Kind CompactView::kind() const noexcept {
  switch (*p_) {
    case kNull: return core::Kind::Null;
    case kFalse:
    case kTrue: return core::Kind::Bool;
    case kInt: return core::Kind::Int;
    case kUint: return core::Kind::Uint;
    case kDouble: return core::Kind::Double;
    case kInterned:
    case kInline: return core::Kind::String;
    case kBytes: return core::Kind::Bytes;
    case kList: return core::Kind::List;
    default: return core::Kind::Map;
  }
}

std::optional<std::string_view> CompactView::string() const noexcept {
  const std::uint8_t* p = p_ + 1;
  if (*p_ == kInterned) return interner_->view(static_cast<std::uint32_t>(get_varint(p)));
  if (*p_ == kInline) {
    std::uint64_t n = get_varint(p);
    return std::string_view(reinterpret_cast<const char*>(p), n);
  }
  return std::nullopt;
}

std::optional<std::int64_t> CompactView::int_value() const noexcept {
  if (*p_ != kInt) return std::nullopt;
  const std::uint8_t* p = p_ + 1;
  std::uint64_t z = get_varint(p);
  return static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

std::optional<bool> CompactView::bool_value() const noexcept {
  if (*p_ == kTrue) return true;
  if (*p_ == kFalse) return false;
  return std::nullopt;
}

std::size_t CompactView::size() const noexcept {
  if (*p_ != kList && *p_ != kMap) return 0;
  const std::uint8_t* p = p_ + 1;
  return get_varint(p);
}

std::optional<CompactView> CompactView::find(std::string_view key) const noexcept {
  if (*p_ != kMap) return std::nullopt;
  const std::uint8_t* p = p_ + 1;
  std::uint64_t n = get_varint(p);
  get_varint(p);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string_view k = read_key(interner_, p);
    if (k == key) return CompactView(interner_, p);
    if (k > key) return std::nullopt;  // keys are sorted
    p = skip(p);
  }
  return std::nullopt;
}

std::optional<CompactView> CompactView::get(
    std::initializer_list<std::string_view> path) const noexcept {
  std::optional<CompactView> at = *this;
  for (std::string_view k : path) {
    at = at->find(k);
    if (!at) return std::nullopt;
  }
  return at;
}

std::string_view CompactView::get_string(std::initializer_list<std::string_view> path,
                                         std::string_view fallback) const noexcept {
  std::optional<CompactView> v = get(path);
  if (!v) return fallback;
  return v->string().value_or(fallback);
}

void CompactView::for_each_entry(
    const std::function<void(std::string_view, CompactView)>& fn) const {
  if (*p_ != kMap) return;
  const std::uint8_t* p = p_ + 1;
  std::uint64_t n = get_varint(p);
  get_varint(p);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string_view k = read_key(interner_, p);
    fn(k, CompactView(interner_, p));
    p = skip(p);
  }
}

void CompactView::for_each_element(const std::function<void(CompactView)>& fn) const {
  if (*p_ != kList) return;
  const std::uint8_t* p = p_ + 1;
  std::uint64_t n = get_varint(p);
  get_varint(p);
  for (std::uint64_t i = 0; i < n; ++i) {
    fn(CompactView(interner_, p));
    p = skip(p);
  }
}

core::Value CompactView::to_value() const {
  const std::uint8_t* p = p_ + 1;
  switch (*p_) {
    case kNull: return core::Value();
    case kFalse: return core::Value(false);
    case kTrue: return core::Value(true);
    case kInt: return core::Value(*int_value());
    case kUint: return core::Value(static_cast<std::uint64_t>(get_varint(p)));
    case kDouble: {
      double d = 0;
      std::memcpy(&d, p, 8);
      return core::Value(d);
    }
    case kInterned:
    case kInline: return core::Value(std::string(*string()));
    case kBytes: {
      std::uint64_t n = get_varint(p);
      return core::Value(core::Bytes{std::string(reinterpret_cast<const char*>(p), n)});
    }
    case kList: {
      core::List l;
      l.reserve(size());
      for_each_element([&](CompactView e) { l.push_back(e.to_value()); });
      return core::Value(std::move(l));
    }
    default: {
      // Entries were sorted when encoded: append and seal is a no-op sort.
      core::Map m;
      m.reserve(size());
      for_each_entry([&](std::string_view k, CompactView e) {
        m.append_unsorted(std::string(k), e.to_value());
      });
      m.seal();
      return core::Value(std::move(m));
    }
  }
}

}  // namespace gpufleet::kube
