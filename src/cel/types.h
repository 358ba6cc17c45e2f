// Static types the checker reasons with: CEL's primitive types, list(T), map(K, V),
// timestamps, durations, type values, extension types and type parameters.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gpufleet::cel {

struct CelType;
using Type = std::shared_ptr<const CelType>;

struct CelType {
  enum class K {
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    List,
    Map,
    Timestamp,
    Duration,
    TypeT,
    Opaque,
    Param
  };
  K kind = K::Dyn;
  std::vector<Type> params;  // List: {elem}; Map: {key, value}
  std::string name;          // Opaque type name or Param name
};

namespace types {
Type dyn();
Type null_type();
Type boolean();
Type integer();
Type uinteger();
Type dbl();
Type string();
Type bytes();
Type timestamp();
Type duration();
Type type();
Type list(Type elem);
Type map(Type key, Type value);
Type opaque(std::string name);
Type param(std::string name);
}  // namespace types

// "int", "list(string)", "map(string, dyn)", "google.protobuf.Timestamp", "A" (a type
// parameter: one capital letter). Throws core::InvalidInput naming the bad text.
Type parse_type(std::string_view text);
std::string type_to_string(const Type& t);
bool type_equal(const Type& a, const Type& b);
// The type of a constant value.
bool is_dyn(const Type& t);

}  // namespace gpufleet::cel
