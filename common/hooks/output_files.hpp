#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

// The files a hook left in its output directory, recorded on its archive_result.
namespace orch {

inline constexpr std::size_t k_max_output_files = 10000;
inline constexpr std::size_t k_max_output_dir_depth = 64;

struct OutputFile {
    std::string path;  // relative to the output directory, '/'-separated, raw bytes
    std::uint64_t size = 0;
};

struct OutputFiles {
    std::vector<OutputFile> files;  // sorted by path
    std::uint64_t total_size = 0;   // sum of files[].size
    bool truncated = false;         // stopped at the entry cap; more files exist

    // [{"path": ..., "size": ...}, ...]; paths that are not valid UTF-8 have the
    // offending bytes replaced by U+FFFD so the JSON can always be serialized.
    nlohmann::json to_json() const;
};

// Lists regular files under `dir`, recursively. Never follows a symlink (the
// directory itself, subdirectories and files alike): symlinks, devices, FIFOs
// and sockets are not listed. The worker's own files at the top level
// (*.stdout.log, *.stderr.log, *.cmd.sh) are excluded. Stops after `max_files`
// files (truncated = true); directories deeper than k_max_output_dir_depth and
// subdirectories that cannot be opened are skipped with a warning.
// Throws std::system_error if `dir` itself cannot be opened (missing, not a
// directory, or a symlink).
OutputFiles list_output_files(const std::filesystem::path& dir, std::size_t max_files = k_max_output_files);

// True for the worker's own log/command files that never count as output.
bool is_worker_file_name(std::string_view file_name);

} // namespace orch
