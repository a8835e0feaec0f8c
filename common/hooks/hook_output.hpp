#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Reading the JSONL a hook printed on stdout (the public hook contract, see
// plugins/README.md). Memory is bounded whatever the hook printed: at most one
// line of k_max_record_line_bytes is buffered, and every kept list is capped.
//
// Which lines count:
//  - A line whose first non-blank character is '{' and that parses to an object
//    with a string "type" is a record.
//  - A line that starts with '{' and contains the text "type" (with the quotes)
//    claims to be a record: if it is not valid JSON (including nesting deeper
//    than 64 levels or ill-formed UTF-8), or longer than 1 MiB, that is an error.
//  - Every other line (plain text, JSON without "type", overlong non-record
//    lines) is log output and ignored.
// Records:
//  - ArchiveResult: status succeeded|failed|skipped|noresults; optional
//    output_str (string), output_json (any), error (string); null = absent.
//    Wrong types or an unknown status are errors. More than one is an error.
//  - Snapshot: url (string, optional), title (string, optional). With a url it
//    is a discovered URL; without, its title is the current snapshot's title
//    (the last one wins). Malformed Snapshot records are ignored with a note:
//    discovered URLs are a by-product and should not fail the archive result.
//  - Any other type is ignored with a note.
namespace orch {

inline constexpr std::size_t k_max_record_line_bytes = 1024 * 1024;
inline constexpr std::size_t k_max_discovered_urls = 10000;
inline constexpr std::size_t k_max_discovered_url_bytes = 8192;   // per URL
inline constexpr std::size_t k_max_title_bytes = 8192;
inline constexpr std::size_t k_max_output_messages = 100;           // errors, notes

struct ArchiveResultRecord {
    std::string status;
    std::optional<std::string> output_str;
    nlohmann::json output_json;  // null when absent
    std::optional<std::string> error;
    std::size_t line = 0;
};

struct DiscoveredUrl {
    std::string url;
    std::optional<std::string> title;
    std::size_t line = 0;
};

struct HookOutput {
    std::optional<ArchiveResultRecord> archive_result;  // the first valid one
    std::size_t archive_result_count = 0;               // every ArchiveResult line seen
    std::vector<DiscoveredUrl> discovered;
    std::size_t discovered_dropped = 0;                  // beyond k_max_discovered_urls
    std::optional<std::string> title;
    // Contract violations; any of them fails the archive result. Each names a line.
    std::vector<std::string> errors;
    // Things ignored that are worth a log line (unknown record types, skipped lines).
    std::vector<std::string> notes;
    std::size_t errors_dropped = 0;                      // beyond k_max_output_messages
    std::size_t notes_dropped = 0;
    std::size_t lines = 0;
};

// Incremental parser: feed() any chunking of the byte stream, then finish().
// Not thread-safe; never throws except std::bad_alloc.
class HookOutputParser {
public:
    void feed(std::string_view bytes);
    // Handles a last line without '\n' and returns the result; the parser is
    // then spent.
    HookOutput finish();

private:
    void end_line();
    void handle_line(std::string_view line);
    void handle_archive_result(const nlohmann::json& record);
    void handle_snapshot(const nlohmann::json& record);
    void error(std::string text);
    void note(std::string text);

    HookOutput m_out;
    std::string m_line;
    bool m_overlong = false;
    bool m_overlong_claims_record = false;
    std::size_t m_line_no = 0;
    std::size_t m_discovered_bytes = 0;
    std::vector<std::size_t> m_archive_result_lines;
};

// Streams a stdout log file through HookOutputParser in fixed-size chunks.
// Throws std::system_error if the file cannot be opened or read.
HookOutput parse_hook_output_file(const std::filesystem::path& path);

} // namespace orch
