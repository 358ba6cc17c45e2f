#include "kube/api/compact_protobuf.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kube/api/compact_tape.h"
#include "kube/api/compact_tape_writer.h"

namespace gpufleet::kube {

// The descriptor set of api/k8s_wire.proto, compiled in (cmake/embed_bytes.cmake).
std::string_view k8s_wire_descriptor_set();

namespace {

namespace pb = google::protobuf;
using namespace tape;

// ---- the plan: each message's fields by number, with their JSON names and forms ------------

// api/k8s_wire.proto's custom options.
constexpr int kJsonFormOption = 51001;
constexpr int kJsonTypeOption = 51002;

enum class Type : std::uint8_t { String, Bool, Int32, Int64, Message, Other };
enum class Form : std::uint8_t { OmitEmpty, Always, Pointer, Inline };
enum class Special : std::uint8_t { Object, Time, Quantity, IntOrString, RawJson };

struct MsgPlan;

struct FieldPlan {
  std::string key;  // the JSON name
  std::uint32_t number = 0;
  Type type = Type::Other;
  Form form = Form::OmitEmpty;
  bool repeated = false;
  bool is_map = false;
  const MsgPlan* msg = nullptr;  // Message: its plan; a map: the value's plan (null: string)
};

struct MsgPlan {
  std::string name;
  Special special = Special::Object;
  std::vector<FieldPlan> fields;
  std::vector<std::int16_t> by_number;  // field number -> index into fields, -1 for none

  [[nodiscard]] const FieldPlan* find(std::uint32_t number) const noexcept {
    if (number >= by_number.size() || by_number[number] < 0) return nullptr;
    return &fields[static_cast<std::size_t>(by_number[number])];
  }
  [[nodiscard]] bool knows_key(std::string_view key) const noexcept {
    for (const auto& f : fields) {
      if (f.key == key) return true;
      if (f.form == Form::Inline && f.msg != nullptr && f.msg->knows_key(key)) return true;
    }
    return false;
  }
};

std::optional<std::uint64_t> option_varint(const pb::Message& options, int number) {
  const pb::UnknownFieldSet& u = options.GetReflection()->GetUnknownFields(options);
  for (int i = 0; i < u.field_count(); ++i) {
    if (u.field(i).number() == number && u.field(i).type() == pb::UnknownField::TYPE_VARINT) {
      return u.field(i).varint();
    }
  }
  return std::nullopt;
}

// The plans of api/k8s_wire.proto's messages. The descriptor pool is needed only to build
// them: it is dropped afterwards (it held about 0.4 MB; the plans keep what decoding reads).
class Schema {
 public:
  Schema() {
    pb::FileDescriptorSet set;
    std::string_view bytes = k8s_wire_descriptor_set();
    if (!set.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      throw std::logic_error("the compiled-in Kubernetes wire schema does not parse");
    }
    pb::DescriptorPool pool;
    for (const auto& file : set.file()) {
      if (pool.BuildFile(file) == nullptr) {
        throw std::logic_error("the compiled-in Kubernetes wire schema does not build: " +
                               file.name());
      }
    }
    Builder b{pool, {}, plans_};
    kinds_.emplace("Node", b.plan("gpufleet.kube.wire.Node"));
    kinds_.emplace("Pod", b.plan("gpufleet.kube.wire.Pod"));
    kinds_.emplace("Status", b.plan("gpufleet.kube.wire.MetaStatus"));
    // The forms come from custom options read back as unknown fields: a build whose options
    // got lost would decode wrongly without a sound, so check one.
    const MsgPlan* taint = b.plan("gpufleet.kube.wire.Taint");
    if (taint->find(1) == nullptr || taint->find(1)->form != Form::Always) {
      throw std::logic_error("the compiled-in Kubernetes wire schema lost its json_form options");
    }
  }

  [[nodiscard]] const MsgPlan* kind(std::string_view name) const {
    auto it = kinds_.find(std::string(name));
    return it == kinds_.end() ? nullptr : it->second;
  }

 private:
  struct Builder {
    const pb::DescriptorPool& pool;
    std::unordered_map<const pb::Descriptor*, MsgPlan*> by_descriptor;
    std::vector<std::unique_ptr<MsgPlan>>& owned;

    MsgPlan* plan(const std::string& full_name) {
      const pb::Descriptor* d = pool.FindMessageTypeByName(full_name);
      if (d == nullptr) throw std::logic_error("wire schema lacks " + full_name);
      return plan(d);
    }

    MsgPlan* plan(const pb::Descriptor* d) {
      auto it = by_descriptor.find(d);
      if (it != by_descriptor.end()) return it->second;
      MsgPlan* m = owned.emplace_back(std::make_unique<MsgPlan>()).get();
      by_descriptor.emplace(d, m);  // before the fields: types may refer to each other
      m->name = d->name();
      if (auto t = option_varint(d->options(), kJsonTypeOption)) m->special = Special(*t);
      std::uint32_t max_number = 0;
      for (int i = 0; i < d->field_count(); ++i) {
        const pb::FieldDescriptor* f = d->field(i);
        FieldPlan fp;
        fp.key = f->name();
        fp.number = static_cast<std::uint32_t>(f->number());
        fp.repeated = f->is_repeated();
        fp.is_map = f->is_map();
        if (auto form = option_varint(f->options(), kJsonFormOption)) fp.form = Form(*form);
        if (fp.is_map) {
          const pb::FieldDescriptor* value = f->message_type()->map_value();
          fp.type = Type::Message;
          fp.msg = value->type() == pb::FieldDescriptor::TYPE_MESSAGE ? plan(value->message_type())
                                                                      : nullptr;
        } else {
          switch (f->type()) {
            case pb::FieldDescriptor::TYPE_STRING: fp.type = Type::String; break;
            case pb::FieldDescriptor::TYPE_BOOL: fp.type = Type::Bool; break;
            case pb::FieldDescriptor::TYPE_INT32: fp.type = Type::Int32; break;
            case pb::FieldDescriptor::TYPE_INT64: fp.type = Type::Int64; break;
            case pb::FieldDescriptor::TYPE_MESSAGE:
              fp.type = Type::Message;
              fp.msg = plan(f->message_type());
              break;
            default: fp.type = Type::Other; break;  // bytes, doubles: refused where kept
          }
        }
        max_number = std::max(max_number, fp.number);
        m->fields.push_back(std::move(fp));
      }
      if (m->fields.size() > 64) throw std::logic_error("wire message over 64 fields: " + m->name);
      m->by_number.assign(max_number + 1, -1);
      for (std::size_t i = 0; i < m->fields.size(); ++i) {
        m->by_number[m->fields[i].number] = static_cast<std::int16_t>(i);
      }
      return m;
    }
  };

  std::vector<std::unique_ptr<MsgPlan>> plans_;
  std::unordered_map<std::string, const MsgPlan*> kinds_;
};

const Schema& schema() {
  static const Schema s;
  return s;
}

// ---- reading ----------------------------------------------------------------------------

using In = pb::io::CodedInputStream;

constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLength = 2;
constexpr int kFixed32 = 5;

const char* wire_type_name(int wt) {
  switch (wt) {
    case kVarint: return "varint";
    case kFixed64: return "64-bit";
    case kLength: return "length-delimited";
    case kFixed32: return "32-bit";
    default: return "group (unsupported)";
  }
}

const std::uint8_t* u8(std::string_view s) noexcept {
  return reinterpret_cast<const std::uint8_t*>(s.data());
}
int isize(std::string_view s) noexcept { return static_cast<int>(s.size()); }

// ---- writing ----------------------------------------------------------------------------

// Formats Unix seconds as metav1.Time's JSON does (RFC 3339, UTC, whole seconds).
bool format_time(std::int64_t seconds, std::string& out) {
  // Years 0001..9999 only: Go writes others in forms RFC 3339 does not have.
  if (seconds < -62135596800LL || seconds > 253402300799LL) return false;
  std::int64_t days = seconds / 86400;
  std::int64_t rem = seconds % 86400;
  if (rem < 0) {
    rem += 86400;
    --days;
  }
  // Civil from days (proleptic Gregorian), after H. Hinnant's algorithm.
  std::int64_t z = days + 719468;
  std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  std::int64_t doe = z - era * 146097;
  std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  std::int64_t y = yoe + era * 400;
  std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  std::int64_t mp = (5 * doy + 2) / 153;
  std::int64_t d = doy - (153 * mp + 2) / 5 + 1;
  std::int64_t m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[32];
  int n = std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ",
                        static_cast<long long>(y), static_cast<long long>(m),
                        static_cast<long long>(d), static_cast<long long>(rem / 3600),
                        static_cast<long long>(rem % 3600 / 60), static_cast<long long>(rem % 60));
  out.assign(buf, static_cast<std::size_t>(n));
  return true;
}

// Where a key's value goes under the decode trees, as compact_json's map() decides.
struct Child {
  bool skip = false;
  const core::JsonPrune* prune = nullptr;
  const core::JsonPrune* keep = nullptr;
};

Child child_of(const core::JsonPrune* prune, const core::JsonPrune* keep, std::string_view key) {
  Child c;
  c.prune = prune != nullptr ? prune->child(key) : nullptr;
  if (c.prune != nullptr && c.prune->drops_all()) return {true};
  if (keep != nullptr) {
    c.keep = keep->child(key);
    if (c.keep == nullptr) return {true};
    if (c.keep->drops_all()) c.keep = nullptr;  // the path ends here: keep it all
  }
  return c;
}

class ProtoTapeWriter : public TapeWriterBase<ProtoTapeWriter> {
 public:
  ProtoTapeWriter(StringInterner& interner, const core::InputLimits& limits,
                  std::string_view source, std::string& out)
      : TapeWriterBase(interner, limits, source, out) {}

  // Writes message `m` (the whole of `in` up to its limit) as a map. `extra` adds the
  // type meta of a single object's JSON form.
  void root(In& in, const MsgPlan& m, const core::JsonPrune* prune, const core::JsonPrune* keep,
            const ProtobufEnvelope* extra) {
    MapCtx ctx = open_map();
    if (extra != nullptr) {
      if (!extra->api_version.empty())
        type_meta_entry("apiVersion", extra->api_version, prune, keep, ctx);
      if (!extra->kind.empty()) type_meta_entry("kind", extra->kind, prune, keep, ctx);
    }
    fields(in, m, prune, keep, 1, ctx, "");
    close_map(ctx);
  }

  [[noreturn]] void unsupported(const std::string& what) const {
    throw UnsupportedProtobuf(std::string(source_), 0, 0, what);
  }

 private:
  struct MapCtx {
    std::size_t body;
    std::size_t first;  // this map's entries sit at entries_[first..]
    bool sorted = true;
  };
  // A repeated field's list (or a map field's map) being filled by consecutive occurrences.
  struct Open {
    const FieldPlan* field = nullptr;
    bool dropped = false;
    Child child;
    std::size_t begin = 0;  // of the key record
    std::size_t body = 0;
    std::size_t count = 0;
    MapCtx map{};  // for a map field
  };

  MapCtx open_map() {
    out_.push_back(static_cast<char>(kMap));
    return MapCtx{out_.size(), entries_.size()};
  }

  void close_map(MapCtx& ctx) {
    std::size_t count = entries_.size() - ctx.first;
    if (!ctx.sorted) sort_entries(ctx.body, ctx.first);
    entries_.resize(ctx.first);
    insert_header(ctx.body, count);
  }

  // Records the entry that starts at `begin` (its key record) and ends at the tape's end.
  void add_entry(MapCtx& ctx, std::string_view key, std::size_t begin) {
    if (out_.size() - ctx.body > 0xffffffffU) fail("object too large for the compact cache form");
    if (entries_.size() > ctx.first && !(entries_.back().key < key)) ctx.sorted = false;
    entries_.push_back({key, static_cast<std::uint32_t>(begin - ctx.body),
                        static_cast<std::uint32_t>(out_.size() - ctx.body)});
  }

  void type_meta_entry(std::string_view key, std::string_view value, const core::JsonPrune* prune,
                       const core::JsonPrune* keep, MapCtx& ctx) {
    Child c = child_of(prune, keep, key);
    if (c.skip || c.keep != nullptr) return;  // a string where the projection wants a map
    std::size_t begin = out_.size();
    this->key(key);
    string(value, true);
    add_entry(ctx, key, begin);
  }

  void check_depth(std::size_t depth) const {
    if (depth > limits_.max_depth) {
      fail("document nested too deeply (limit " + std::to_string(limits_.max_depth) + ")");
    }
  }

  std::uint64_t varint(In& in, const FieldPlan& f) {
    std::uint64_t v = 0;
    if (!in.ReadVarint64(&v)) fail("truncated varint in field \"" + f.key + "\"");
    return v;
  }

  std::string_view bytes(In& in, std::string_view what) {
    std::uint32_t len = 0;
    if (!in.ReadVarint32(&len)) fail("truncated length of " + std::string(what));
    if (len == 0) return std::string_view("", 0);  // not null: interning copies it
    const void* data = nullptr;
    int size = 0;
    if (!in.GetDirectBufferPointer(&data, &size) || static_cast<std::uint32_t>(size) < len) {
      fail(std::string(what) + " of " + std::to_string(len) +
           " bytes runs past the end of its message");
    }
    in.Skip(static_cast<int>(len));
    return {static_cast<const char*>(data), len};
  }

  void check_string(std::string_view s) const {
    if (s.size() > limits_.max_string_bytes) {
      fail("a string of " + core::describe_bytes(s.size()) + " is over the limit of " +
           core::describe_bytes(limits_.max_string_bytes) + " for one value");
    }
  }

  void skip_field(In& in, int wt, std::uint32_t number, const MsgPlan& m) {
    std::uint64_t v = 0;
    bool ok = false;
    switch (wt) {
      case kVarint: ok = in.ReadVarint64(&v); break;
      case kFixed64: ok = in.Skip(8); break;
      case kFixed32: ok = in.Skip(4); break;
      case kLength: {
        std::uint32_t len = 0;
        ok = in.ReadVarint32(&len) && in.Skip(static_cast<int>(len));
        break;
      }
      default: break;
    }
    if (!ok) {
      fail("field " + std::to_string(number) + " of " + m.name + " (" + wire_type_name(wt) +
           ") is truncated or malformed");
    }
  }

  // A field this build's schema lacks: fine where the cache drops it anyway.
  void unknown_field(In& in, int wt, std::uint32_t number, const MsgPlan& m,
                     const core::JsonPrune* keep, std::string_view path) {
    bool dropped = keep != nullptr;
    if (dropped) {
      for (std::string_view k : keep->child_keys()) {
        if (!m.knows_key(k)) dropped = false;  // the projection may want the unknown field
      }
    }
    if (!dropped) {
      unsupported("field " + std::to_string(number) + " of " + m.name + " at \"" +
                  std::string(path) + "\" is not in this build's schema (api/k8s_wire.proto)");
    }
    skip_field(in, wt, number, m);
  }

  void expect_wire(const FieldPlan& f, const MsgPlan& m, int wt, int want) {
    if (wt != want) {
      fail("field \"" + f.key + "\" (" + std::to_string(f.number) + ") of " + m.name + " is " +
           wire_type_name(wt) + ", expected " + wire_type_name(want));
    }
  }

  // The fields of `m` as entries of the map `ctx` (an inline message adds to its parent's).
  void fields(In& in, const MsgPlan& m, const core::JsonPrune* prune, const core::JsonPrune* keep,
              std::size_t depth, MapCtx& ctx, std::string_view path) {
    check_depth(depth);
    std::uint64_t seen = 0;
    Open open;
    while (in.BytesUntilLimit() != 0) {
      std::uint32_t tag = in.ReadTag();
      if (tag == 0) fail("malformed field tag in " + m.name);
      std::uint32_t number = tag >> 3;
      int wt = static_cast<int>(tag & 7);
      const FieldPlan* f = m.find(number);
      if (f == nullptr) {
        close_open(open, ctx);
        unknown_field(in, wt, number, m, keep, path);
        continue;
      }
      std::uint64_t bit = std::uint64_t{1} << (f - m.fields.data());
      if (open.field != f) {
        close_open(open, ctx);
        if ((seen & bit) != 0) {
          unsupported("field \"" + f->key + "\" of " + m.name + " appears twice");
        }
      }
      seen |= bit;
      if (f->is_map) {
        expect_wire(*f, m, wt, kLength);
        if (open.field != f) start_open(open, *f, prune, keep, true);
        map_entry(in, open, depth);
      } else if (f->repeated) {
        if (open.field != f) start_open(open, *f, prune, keep, false);
        element(in, open, m, wt, depth);
      } else {
        single(in, *f, m, wt, prune, keep, depth, ctx, path);
      }
    }
    close_open(open, ctx);
    // Fields Go's encoding/json writes even when zero, absent on the wire (empty lists).
    for (std::size_t i = 0; i < m.fields.size(); ++i) {
      const FieldPlan& f = m.fields[i];
      if ((seen & (std::uint64_t{1} << i)) != 0 || f.form != Form::Always) continue;
      if (f.type == Type::Message && !f.repeated && !f.is_map) continue;
      Child c = child_of(prune, keep, f.key);
      if (c.skip) continue;
      bool is_list = f.repeated || f.is_map;
      if (!is_list && c.keep != nullptr) continue;  // a scalar under the projection
      std::size_t begin = out_.size();
      key(f.key);
      if (is_list) {
        out_.push_back(static_cast<char>(kNull));
      } else if (f.type == Type::String) {
        string(std::string_view("", 0), !unique_valued_key(f.key));
      } else if (f.type == Type::Bool) {
        out_.push_back(static_cast<char>(kFalse));
      } else if (f.type == Type::Int32 || f.type == Type::Int64) {
        out_.push_back(static_cast<char>(kInt));
        put_varint(out_, 0);
      } else {
        out_.resize(begin);
        continue;
      }
      add_entry(ctx, f.key, begin);
    }
  }

  void single(In& in, const FieldPlan& f, const MsgPlan& m, int wt, const core::JsonPrune* prune,
              const core::JsonPrune* keep, std::size_t depth, MapCtx& ctx, std::string_view path) {
    if (f.type == Type::Message) {
      expect_wire(f, m, wt, kLength);
      std::uint32_t len = 0;
      if (!in.ReadVarint32(&len)) fail("truncated length of \"" + f.key + "\"");
      if (static_cast<int>(len) < 0 || in.BytesUntilLimit() < static_cast<int>(len)) {
        fail("field \"" + f.key + "\" of " + std::to_string(len) +
             " bytes runs past the end of its message");
      }
      In::Limit limit = in.PushLimit(static_cast<int>(len));
      if (f.form == Form::Inline) {
        fields(in, *f.msg, prune, keep, depth + 1, ctx, path);
      } else {
        Child c = child_of(prune, keep, f.key);
        if (c.skip) {
          in.Skip(static_cast<int>(len));
        } else {
          std::size_t begin = out_.size();
          key(f.key);
          if (message_value(in, *f.msg, c, !unique_valued_key(f.key), depth + 1, f.key)) {
            add_entry(ctx, f.key, begin);
          } else {
            out_.resize(begin);
          }
        }
      }
      in.PopLimit(limit);
      return;
    }
    Child c = child_of(prune, keep, f.key);
    switch (f.type) {
      case Type::String: {
        expect_wire(f, m, wt, kLength);
        std::string_view s = bytes(in, f.key);
        if ((s.empty() && f.form == Form::OmitEmpty) || c.skip || c.keep != nullptr) return;
        check_string(s);
        std::size_t begin = out_.size();
        key(f.key);
        string(s, !unique_valued_key(f.key));
        add_entry(ctx, f.key, begin);
        return;
      }
      case Type::Bool:
      case Type::Int32:
      case Type::Int64: {
        expect_wire(f, m, wt, kVarint);
        std::uint64_t v = varint(in, f);
        if ((v == 0 && f.form == Form::OmitEmpty) || c.skip || c.keep != nullptr) return;
        std::size_t begin = out_.size();
        key(f.key);
        scalar(f.type, v);
        add_entry(ctx, f.key, begin);
        return;
      }
      default:
        if (c.skip) {
          skip_field(in, wt, f.number, m);
          return;
        }
        unsupported("field \"" + f.key + "\" of " + m.name + " has a type this decoder lacks");
    }
  }

  void scalar(Type t, std::uint64_t v) {
    if (t == Type::Bool) {
      out_.push_back(static_cast<char>(v != 0 ? kTrue : kFalse));
      return;
    }
    std::int64_t i = t == Type::Int32 ? static_cast<std::int32_t>(v) : static_cast<std::int64_t>(v);
    out_.push_back(static_cast<char>(kInt));
    put_varint(out_, zigzag(i));
  }

  // A message's JSON value (a map, or the scalar of Time & co); false when the projection drops
  // it (a scalar where a map was expected).
  bool message_value(In& in, const MsgPlan& m, const Child& c, bool intern, std::size_t depth,
                     std::string_view path) {
    switch (m.special) {
      case Special::Object: {
        MapCtx ctx = open_map();
        fields(in, m, c.prune, c.keep, depth, ctx, path);
        close_map(ctx);
        return true;
      }
      case Special::Time: {
        if (in.BytesUntilLimit() == 0) {  // the zero time: JSON null
          out_.push_back(static_cast<char>(kNull));
          return true;
        }
        std::int64_t seconds = 0;
        while (in.BytesUntilLimit() != 0) {
          std::uint32_t tag = in.ReadTag();
          std::uint64_t v = 0;
          if (tag != 0 && (tag & 7) == kVarint) {
            if (!in.ReadVarint64(&v)) fail("truncated Time at \"" + std::string(path) + "\"");
            if ((tag >> 3) == 1) seconds = static_cast<std::int64_t>(v);
          } else {
            fail("malformed Time at \"" + std::string(path) + "\"");
          }
        }
        if (c.keep != nullptr) return false;
        std::string text;
        if (!format_time(seconds, text)) {
          unsupported("time " + std::to_string(seconds) + " s at \"" + std::string(path) +
                      "\" is outside years 1-9999");
        }
        string(text, intern);
        return true;
      }
      case Special::Quantity: {
        std::string_view s = "0";  // a zero Quantity's string
        while (in.BytesUntilLimit() != 0) {
          std::uint32_t tag = in.ReadTag();
          if (tag == ((1 << 3) | kLength)) {
            s = bytes(in, "Quantity");
          } else {
            fail("malformed Quantity at \"" + std::string(path) + "\"");
          }
        }
        if (c.keep != nullptr) return false;
        check_string(s);
        string(s, intern);
        return true;
      }
      case Special::IntOrString: {
        std::uint64_t type = 0;
        std::uint64_t int_val = 0;
        std::string_view str_val;
        while (in.BytesUntilLimit() != 0) {
          std::uint32_t tag = in.ReadTag();
          bool ok = true;
          switch (tag) {
            case (1 << 3) | kVarint: ok = in.ReadVarint64(&type); break;
            case (2 << 3) | kVarint: ok = in.ReadVarint64(&int_val); break;
            case (3 << 3) | kLength: str_val = bytes(in, "IntOrString"); break;
            default: ok = false;
          }
          if (!ok) fail("malformed IntOrString at \"" + std::string(path) + "\"");
        }
        if (c.keep != nullptr) return false;
        if (type == 1) {
          check_string(str_val);
          string(str_val, intern);
        } else {
          scalar(Type::Int32, int_val);
        }
        return true;
      }
      case Special::RawJson: {
        std::string_view raw;
        while (in.BytesUntilLimit() != 0) {
          std::uint32_t tag = in.ReadTag();
          if (tag == ((1 << 3) | kLength)) {
            raw = bytes(in, "FieldsV1");
          } else {
            fail("malformed FieldsV1 at \"" + std::string(path) + "\"");
          }
        }
        if (raw.empty()) {
          out_.push_back(static_cast<char>(kNull));
          return true;
        }
        return append_compact_json(raw, c.prune, c.keep, intern, depth, out_, source_, interner_,
                                   limits_);
      }
    }
    return false;
  }

  void start_open(Open& open, const FieldPlan& f, const core::JsonPrune* prune,
                  const core::JsonPrune* keep, bool is_map) {
    open = Open{};
    open.field = &f;
    open.child = child_of(prune, keep, f.key);
    if (open.child.skip) {
      open.dropped = true;
      return;
    }
    open.begin = out_.size();
    key(f.key);
    if (is_map) {
      open.map = open_map();
    } else {
      out_.push_back(static_cast<char>(kList));
      open.body = out_.size();
    }
  }

  void close_open(Open& open, MapCtx& ctx) {
    if (open.field == nullptr) return;
    const FieldPlan& f = *open.field;
    if (!open.dropped) {
      if (f.is_map) {
        close_map(open.map);
      } else {
        insert_header(open.body, open.count);
      }
      add_entry(ctx, f.key, open.begin);
    }
    open = Open{};
  }

  // One element of a repeated field (all of a packed run).
  void element(In& in, Open& open, const MsgPlan& m, int wt, std::size_t depth) {
    const FieldPlan& f = *open.field;
    if (open.dropped) {
      skip_field(in, wt, f.number, m);
      return;
    }
    bool intern = !unique_valued_key(f.key);
    switch (f.type) {
      case Type::String: {
        expect_wire(f, m, wt, kLength);
        std::string_view s = bytes(in, f.key);
        if (open.child.keep != nullptr) {
          out_.push_back(static_cast<char>(kNull));  // as Projection: a scalar becomes null
        } else {
          check_string(s);
          string(s, intern);
        }
        ++open.count;
        return;
      }
      case Type::Bool:
      case Type::Int32:
      case Type::Int64: {
        auto one = [&](std::uint64_t v) {
          if (open.child.keep != nullptr) {
            out_.push_back(static_cast<char>(kNull));
          } else {
            scalar(f.type, v);
          }
          ++open.count;
        };
        if (wt == kLength) {  // packed
          std::uint32_t len = 0;
          if (!in.ReadVarint32(&len) || in.BytesUntilLimit() < static_cast<int>(len)) {
            fail("packed field \"" + f.key + "\" runs past the end of its message");
          }
          In::Limit limit = in.PushLimit(static_cast<int>(len));
          while (in.BytesUntilLimit() != 0) one(varint(in, f));
          in.PopLimit(limit);
        } else {
          expect_wire(f, m, wt, kVarint);
          one(varint(in, f));
        }
        return;
      }
      case Type::Message: {
        expect_wire(f, m, wt, kLength);
        std::uint32_t len = 0;
        if (!in.ReadVarint32(&len) || static_cast<int>(len) < 0 ||
            in.BytesUntilLimit() < static_cast<int>(len)) {
          fail("an element of \"" + f.key + "\" runs past the end of its message");
        }
        check_depth(depth + 1);
        In::Limit limit = in.PushLimit(static_cast<int>(len));
        if (!message_value(in, *f.msg, open.child, intern, depth + 1, f.key)) {
          out_.push_back(static_cast<char>(kNull));
        }
        in.PopLimit(limit);
        ++open.count;
        return;
      }
      default:
        unsupported("field \"" + f.key + "\" of " + m.name + " has a type this decoder lacks");
    }
  }

  // One entry of a map field: {1: key, 2: value}.
  void map_entry(In& in, Open& open, std::size_t depth) {
    const FieldPlan& f = *open.field;
    std::string_view entry = bytes(in, f.key);
    if (open.dropped) return;
    In ein(u8(entry), isize(entry));
    ein.PushLimit(isize(entry));
    std::string_view key("", 0);  // not null: interning copies it
    std::string_view value("", 0);
    bool has_value = false;
    while (ein.BytesUntilLimit() != 0) {
      std::uint32_t tag = ein.ReadTag();
      if (tag == ((1 << 3) | kLength)) {
        key = bytes(ein, "a map key");
      } else if (tag == ((2 << 3) | kLength)) {
        value = bytes(ein, "a map value");
        has_value = true;
      } else {
        fail("malformed entry of map \"" + f.key + "\"");
      }
    }
    check_string(key);
    Child c = child_of(open.child.prune, open.child.keep, key);
    if (c.skip) return;
    std::size_t begin = out_.size();
    this->key(key);
    bool kept = true;
    if (f.msg == nullptr) {  // map<string, string>
      if (c.keep != nullptr) {
        kept = false;
      } else {
        check_string(value);
        string(value, !unique_valued_key(key));
      }
    } else {
      In vin(u8(value), isize(value));
      vin.PushLimit(isize(value));
      if (!has_value) value = {};
      kept = message_value(vin, *f.msg, c, !unique_valued_key(key), depth + 1, key);
    }
    if (kept) {
      add_entry(open.map, key, begin);
    } else {
      out_.resize(begin);
    }
  }

  // Rewrites the map body at `body` (entries_[first..]) in key order; duplicate keys are an
  // error, as in the JSON path.
};

std::string& thread_out() {
  thread_local std::string out;
  out.clear();
  return out;
}

void check_size(std::string_view bytes, std::string_view source, const core::InputLimits& limits) {
  if (bytes.size() > limits.max_bytes ||
      bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw core::ParseError(std::string(source), 0, 0,
                           "message is " + core::describe_bytes(bytes.size()) +
                               ", over the input limit of " +
                               core::describe_bytes(limits.max_bytes));
  }
}

}  // namespace

struct ProtobufAccess {
  static const MsgPlan& plan(const ProtobufKind& k) {
    return *static_cast<const MsgPlan*>(k.plan_);
  }
  static ProtobufKind make(const MsgPlan* p) { return ProtobufKind(p); }
};

std::optional<ProtobufKind> ProtobufKind::find(std::string_view kind) {
  const MsgPlan* p = schema().kind(kind);
  if (p == nullptr) return std::nullopt;
  return ProtobufAccess::make(p);
}

std::optional<ProtobufKind> ProtobufKind::for_resource(std::string_view group,
                                                       std::string_view version,
                                                       std::string_view resource) {
  if (!group.empty() || version != "v1") return std::nullopt;
  if (resource == "nodes") return find("Node");
  if (resource == "pods") return find("Pod");
  return std::nullopt;
}

std::string_view ProtobufKind::name() const noexcept {
  std::string_view n = static_cast<const MsgPlan*>(plan_)->name;
  return n == "MetaStatus" ? "Status" : n;
}

bool is_protobuf_body(std::string_view body) noexcept {
  return body.size() >= kProtobufMagic.size() && body.substr(0, 4) == kProtobufMagic;
}

ProtobufEnvelope unwrap_protobuf(std::string_view body, std::string_view source) {
  auto fail = [&](const std::string& what) {
    throw core::ParseError(std::string(source), 0, 0, what);
  };
  if (!is_protobuf_body(body)) {
    fail("not a Kubernetes protobuf message: it must start with the 4 bytes \"k8s\\0\"");
  }
  std::string_view rest = body.substr(4);
  if (rest.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    fail("message over 2 GiB");
  In in(u8(rest), isize(rest));
  in.PushLimit(isize(rest));
  ProtobufEnvelope env;
  auto read_bytes = [&](std::string_view what) -> std::string_view {
    std::uint32_t len = 0;
    const void* data = nullptr;
    int size = 0;
    if (!in.ReadVarint32(&len)) fail("truncated length of " + std::string(what));
    if (len == 0) return std::string_view("", 0);  // not null: interning copies it
    if (!in.GetDirectBufferPointer(&data, &size) || static_cast<std::uint32_t>(size) < len) {
      fail(std::string(what) + " of " + std::to_string(len) + " bytes runs past the end");
    }
    in.Skip(static_cast<int>(len));
    return {static_cast<const char*>(data), len};
  };
  while (in.BytesUntilLimit() != 0) {
    std::uint32_t tag = in.ReadTag();
    switch (tag) {
      case (1 << 3) | kLength: {
        std::string_view tm = read_bytes("typeMeta");
        In tin(u8(tm), isize(tm));
        tin.PushLimit(isize(tm));
        while (tin.BytesUntilLimit() != 0) {
          std::uint32_t t = tin.ReadTag();
          std::uint32_t len = 0;
          const void* data = nullptr;
          int size = 0;
          if ((t & 7) != kLength || !tin.ReadVarint32(&len)) fail("malformed typeMeta");
          std::string_view v;
          if (len > 0) {
            if (!tin.GetDirectBufferPointer(&data, &size) ||
                static_cast<std::uint32_t>(size) < len) {
              fail("malformed typeMeta");
            }
            v = {static_cast<const char*>(data), len};
            tin.Skip(static_cast<int>(len));
          }
          if ((t >> 3) == 1) env.api_version = v;
          if ((t >> 3) == 2) env.kind = v;
        }
        break;
      }
      case (2 << 3) | kLength: env.raw = read_bytes("raw"); break;
      case (3 << 3) | kLength: {
        std::string_view enc = read_bytes("contentEncoding");
        if (!enc.empty()) {
          fail("contentEncoding \"" + std::string(enc) +
               "\" is not supported (the API server sends objects uncompressed)");
        }
        break;
      }
      case (4 << 3) | kLength: read_bytes("contentType"); break;
      default:
        if (tag == 0) fail("malformed runtime.Unknown envelope");
        {
          std::uint64_t v = 0;
          bool ok = false;
          switch (tag & 7) {
            case kVarint: ok = in.ReadVarint64(&v); break;
            case kLength:
              read_bytes("an unknown field");
              ok = true;
              break;
            case kFixed64: ok = in.Skip(8); break;
            case kFixed32: ok = in.Skip(4); break;
            default: break;
          }
          if (!ok) fail("malformed runtime.Unknown envelope");
        }
    }
  }
  return env;
}

CompactPtr decode_compact_protobuf(std::string_view message, const ProtobufKind& kind,
                                   const CompactDecodeShape& shape,
                                   const ProtobufEnvelope* type_meta, std::string_view source,
                                   StringInterner& interner, const core::InputLimits& limits) {
  check_size(message, source, limits);
  const MsgPlan& m = ProtobufAccess::plan(kind);
  std::string& out = thread_out();
  In in(u8(message), isize(message));
  in.PushLimit(isize(message));
  ProtoTapeWriter w(interner, limits, source, out);
  if (shape.prune != nullptr && shape.prune->drops_all()) {
    out.push_back(static_cast<char>(tape::kNull));
  } else {
    const core::JsonPrune* keep =
        shape.keep != nullptr && shape.keep->drops_all() ? nullptr : shape.keep;
    w.root(in, m, shape.prune, keep, type_meta);
  }
  auto size = static_cast<std::uint32_t>(out.size());
  auto tape_bytes = std::make_unique<std::uint8_t[]>(out.size());
  std::memcpy(tape_bytes.get(), out.data(), out.size());
  if (out.capacity() > (std::size_t{1} << 20)) std::string().swap(out);
  return std::make_shared<const CompactObject>(&interner, std::move(tape_bytes), size);
}

namespace {

std::string status_json(const ProtobufEnvelope& env, std::string_view source) {
  std::optional<ProtobufKind> status = ProtobufKind::find("Status");
  ProtobufEnvelope tm{env.api_version.empty() ? "v1" : env.api_version, "Status", {}};
  CompactPtr obj = decode_compact_protobuf(env.raw, *status, {}, &tm, source);
  return core::to_json(obj->to_value());
}

}  // namespace

CompactPtr decode_compact_protobuf_watch_event(std::string_view frame, const ProtobufKind& kind,
                                               const CompactDecodeShape& shape, std::string& type,
                                               std::string& status, StringInterner& interner,
                                               const core::InputLimits& limits) {
  constexpr std::string_view kSource = "watch event";
  auto fail = [&](const std::string& what) {
    throw core::ParseError(std::string(kSource), 0, 0, what);
  };
  check_size(frame, kSource, limits);
  type.clear();
  status.clear();
  In in(u8(frame), isize(frame));
  in.PushLimit(isize(frame));
  std::string_view object;
  auto read_bytes = [&](In& s, std::string_view what) -> std::string_view {
    std::uint32_t len = 0;
    const void* data = nullptr;
    int size = 0;
    if (!s.ReadVarint32(&len)) fail("truncated length of " + std::string(what));
    if (len == 0) return std::string_view("", 0);  // not null: interning copies it
    if (!s.GetDirectBufferPointer(&data, &size) || static_cast<std::uint32_t>(size) < len) {
      fail(std::string(what) + " of " + std::to_string(len) + " bytes runs past the end");
    }
    s.Skip(static_cast<int>(len));
    return {static_cast<const char*>(data), len};
  };
  bool has_object = false;
  while (in.BytesUntilLimit() != 0) {
    std::uint32_t tag = in.ReadTag();
    if (tag == ((1 << 3) | kLength)) {
      type.assign(read_bytes(in, "the event type"));
    } else if (tag == ((2 << 3) | kLength)) {
      std::string_view ext = read_bytes(in, "the event object");
      In ein(u8(ext), isize(ext));
      ein.PushLimit(isize(ext));
      while (ein.BytesUntilLimit() != 0) {
        std::uint32_t t = ein.ReadTag();
        if (t == ((1 << 3) | kLength)) {
          object = read_bytes(ein, "the event object's raw bytes");
          has_object = true;
        } else {
          fail("malformed RawExtension in a watch event");
        }
      }
    } else {
      fail("malformed watch event frame (field tag " + std::to_string(tag) +
           "); is this a protobuf watch?");
    }
  }
  if (!has_object) return nullptr;
  ProtobufEnvelope env = unwrap_protobuf(object, kSource);
  if (type == "ERROR" || env.kind == "Status") {
    status = status_json(env, kSource);
    return nullptr;
  }
  if (env.kind != kind.name()) {
    fail("a watch of " + std::string(kind.name()) + " objects sent a " + std::string(env.kind));
  }
  return decode_compact_protobuf(env.raw, kind, shape, &env, kSource, interner, limits);
}

std::string protobuf_status_json(std::string_view body) {
  if (!is_protobuf_body(body)) return {};
  try {
    ProtobufEnvelope env = unwrap_protobuf(body, "Status");
    if (env.kind != "Status") return {};
    return status_json(env, "Status");
  } catch (const core::InvalidInput&) {
    return {};
  }
}

// ---- ProtobufListSplitter ------------------------------------------------------------------

namespace {

// Reads a varint at buf[pos..end): its length, 0 when incomplete; throws when over 10 bytes.
std::size_t read_varint(std::string_view buf, std::size_t pos, std::uint64_t& v) {
  v = 0;
  for (std::size_t i = 0; i < 10; ++i) {
    if (pos + i >= buf.size()) return 0;
    auto b = static_cast<std::uint8_t>(buf[pos + i]);
    v |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return i + 1;
  }
  throw core::ParseError("list", 0, 0, "malformed varint in a protobuf list");
}

}  // namespace

void ProtobufListSplitter::feed(std::string_view chunk) {
  buf_.append(chunk);
  while (step()) {
  }
  if (pos_ > 0 && (pos_ == buf_.size() || pos_ >= (std::size_t{1} << 20))) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
}

bool ProtobufListSplitter::step() {
  auto fail = [](const std::string& what) { throw core::ParseError("list", 0, 0, what); };
  std::size_t avail = buf_.size() - pos_;
  if (!magic_) {
    if (avail < 4) return false;
    if (!is_protobuf_body(std::string_view(buf_).substr(pos_))) {
      fail("not a Kubernetes protobuf list: it must start with the 4 bytes \"k8s\\0\"");
    }
    pos_ += 4;
    magic_ = true;
    return true;
  }
  if (skip_ > 0) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(skip_, avail));
    if (n == 0) return false;
    pos_ += n;
    skip_ -= n;
    if (skip_in_list_) {
      list_left_ -= n;
      if (list_left_ == 0) in_list_ = false;
    }
    return true;
  }
  if (avail == 0) return false;
  std::string_view buf(buf_);
  std::uint64_t tag = 0;
  std::size_t n = read_varint(buf, pos_, tag);
  if (n == 0) return false;
  int wt = static_cast<int>(tag & 7);
  std::uint64_t field = tag >> 3;
  std::uint64_t len = 0;
  std::size_t header = n;
  if (wt == kLength) {
    std::size_t m = read_varint(buf, pos_ + n, len);
    if (m == 0) return false;
    header += m;
  } else if (wt == kVarint) {
    std::uint64_t v = 0;
    std::size_t m = read_varint(buf, pos_ + n, v);
    if (m == 0) return false;
    header += m;
  } else if (wt == kFixed64) {
    len = 8;
  } else if (wt == kFixed32) {
    len = 4;
  } else {
    fail("malformed protobuf list (wire type " + std::to_string(wt) + ")");
  }
  if (in_list_ && header + len > list_left_) {
    fail("a field of the protobuf list runs past the end of the list");
  }
  auto consume = [&](std::uint64_t k) {
    pos_ += k;
    if (in_list_) {
      list_left_ -= k;
      if (list_left_ == 0) in_list_ = false;
    }
  };
  auto whole = [&](std::size_t limit, std::string_view what) -> std::optional<std::string_view> {
    if (len > limit) {
      fail(std::string(what) + " of " + core::describe_bytes(len) + " is over the limit of " +
           core::describe_bytes(limit));
    }
    if (avail < header + len) return std::nullopt;
    return buf.substr(pos_ + header, len);
  };
  if (!in_list_) {
    if (field == 2 && wt == kLength) {  // Unknown.raw: the List, streamed
      if (seen_list_) fail("a protobuf list body with two lists");
      seen_list_ = true;
      pos_ += header;
      list_left_ = len;
      in_list_ = len > 0;
      return true;
    }
    if (wt == kLength && field <= 4) {
      auto v = whole(kMaxMeta, "list envelope field");
      if (!v) return false;
      if (field == 3 && !v->empty()) {
        fail("contentEncoding \"" + std::string(*v) +
             "\" is not supported (the API server sends lists uncompressed)");
      }
      consume(header + len);
      return true;
    }
  } else if (wt == kLength && (field == 1 || field == 2)) {
    auto v = whole(field == 1 ? kMaxMeta : kMaxItem, field == 1 ? "list metadata" : "list item");
    if (!v) return false;
    if (field == 1) {
      list_meta(*v);
    } else {
      ++count_;
      on_item_(*v);
    }
    consume(header + len);
    return true;
  }
  // Anything else: dropped as it streams by.
  bool list = in_list_;
  consume(header);
  if (len > 0) {
    skip_ = len;
    skip_in_list_ = list && in_list_;
  }
  return true;
}

void ProtobufListSplitter::list_meta(std::string_view bytes) {
  In in(u8(bytes), isize(bytes));
  in.PushLimit(isize(bytes));
  while (in.BytesUntilLimit() != 0) {
    std::uint32_t tag = in.ReadTag();
    std::uint64_t v = 0;
    std::uint32_t len = 0;
    bool ok = tag != 0;
    if (ok && (tag & 7) == kLength) {
      ok = in.ReadVarint32(&len);
      std::string s;
      ok = ok && in.ReadString(&s, static_cast<int>(len));
      if ((tag >> 3) == 2) rv_ = std::move(s);
      if ((tag >> 3) == 3) continue_ = std::move(s);
    } else if (ok && (tag & 7) == kVarint) {
      ok = in.ReadVarint64(&v);
    } else {
      ok = false;
    }
    if (!ok) throw core::ParseError("list", 0, 0, "malformed list metadata (ListMeta)");
  }
}

void ProtobufListSplitter::finish() const {
  auto fail = [](const std::string& what) { throw core::ParseError("list", 0, 0, what); };
  if (!magic_) fail("the protobuf list body ended before its 4-byte magic");
  if (in_list_ || skip_ > 0 || pos_ < buf_.size()) {
    fail("the protobuf list body ended inside a value (truncated answer)");
  }
  if (!seen_list_) fail("the protobuf body held no list");
}

// ---- ProtobufFrameSplitter -----------------------------------------------------------------

std::optional<std::string_view> ProtobufFrameSplitter::next_frame() {
  if (start_ > 0 && start_ * 2 >= buffer_.size()) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  if (pending() < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const std::uint8_t*>(buffer_.data() + start_);
  std::size_t len = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) |
                    (std::size_t{p[2]} << 8) | std::size_t{p[3]};
  if (len > kMaxFrame) {
    throw core::ParseError("watch event", 0, 0,
                           "a watch frame of " + core::describe_bytes(len) +
                               " is over the limit of " + core::describe_bytes(kMaxFrame));
  }
  if (pending() < 4 + len) return std::nullopt;
  std::string_view frame(buffer_.data() + start_ + 4, len);
  start_ += 4 + len;
  return frame;
}

}  // namespace gpufleet::kube
