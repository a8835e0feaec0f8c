#pragma once

#include <cstdint>
#include <filesystem>

namespace orch {

// Keeps a log file that a child appends to from filling the disk. Once the file
// holds more than `max_bytes`, its oldest part is deallocated with
// fallocate(PUNCH_HOLE): the file keeps its size (the child's O_APPEND offset stays
// valid, readers see zeros where data was) but at most about `max_bytes` of it
// stays on disk, the most recent output. Returns the bytes deallocated by this
// call (0 when under the limit, or when the filesystem cannot punch holes).
// Never throws: a log that cannot be bounded is not a reason to stop a hook.
std::uint64_t bound_log_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// The reader's side: the offset of the first byte at or after `from` that the log
// `fd` still holds, past the hole bound_log_file left (lseek SEEK_DATA). `from`
// itself when nothing there was deallocated or the filesystem reports no holes;
// the file's size when everything from `from` on was deallocated. Moves the file
// offset of `fd`. Throws std::system_error when lseek fails otherwise.
std::uint64_t next_kept_offset(int fd, std::uint64_t from);

} // namespace orch
