#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace orch {

// The last `max_bytes` of a file (whole file if smaller), never reaching into
// the part a log bound deallocated (common/supervision/log_bound.hpp); empty if it cannot
// be read. Never throws for a missing file. Invalid UTF-8 is replaced so the
// result can be stored in a text column.
std::string read_file_tail(const std::filesystem::path& path, std::size_t max_bytes = 4096);

// read_file_tail() of a log we created (a regular file on a real filesystem,
// where a size of 0 means empty, unlike /proc and cgroupfs files): an empty or
// missing log costs one stat, not an open, a stat, a read and a close.
std::string read_log_tail(const std::filesystem::path& path, std::size_t max_bytes);

} // namespace orch
