#include "sim/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "core/file_reader.h"

namespace gpufleet::sim {

std::string read_text_file(const std::string& path) { return core::read_file(path); }

}  // namespace gpufleet::sim
