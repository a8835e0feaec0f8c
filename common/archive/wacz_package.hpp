#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

// A WACZ 1.1.1 package of WARC files: the WARCs under archive/ (stored as
// they are), indexes/index.cdxj, pages/pages.jsonl, datapackage.json and
// datapackage-digest.json, in one ZIP file.
namespace orch {

struct WaczWarc {
    std::string name;             // its file name under archive/; unique in the package
    std::filesystem::path path;   // where it is on disk
};

struct WaczPage {
    std::string url;
    std::string ts;     // ISO 8601 UTC, "2024-01-02T03:04:05Z"
    std::string title;  // "" = none
};

struct WaczInput {
    std::vector<WaczWarc> warcs;   // at least one
    std::vector<WaczPage> pages;   // pages.jsonl, in this order
    std::string title;             // datapackage.json "title"
    std::string main_page_url;     // "" = left out
    std::string main_page_date;    // ISO 8601 UTC; "" = left out
    std::string software;          // "orchestrator 1.2.3"
    std::string created;           // ISO 8601 UTC; "" = now
};

struct WaczResult {
    std::size_t index_lines = 0;     // CDXJ lines written
    std::uint64_t bytes = 0;         // size of the package
    std::vector<std::string> notes;  // cut or skipped parts of WARC files, one sentence each
};

// Writes the package to `target`: into a new `<target>.tmp-XXXXXX` in the same
// directory, synced, then renamed over `target`, so a reader never sees a
// partial package and a failure leaves no file behind. Blocks while it reads
// every WARC twice (digest, index) and copies it. Throws std::system_error
// when the temporary file cannot be made (a directory that is missing or not
// writable), std::invalid_argument for no WARC or duplicate names, and
// std::runtime_error or std::system_error for a WARC that cannot be read or a
// write that fails; the temporary file is removed before the exception leaves.
WaczResult write_wacz(const std::filesystem::path& target, const WaczInput& input);

// The current time as ISO 8601 UTC with seconds: "2024-01-02T03:04:05Z".
std::string iso_utc_now();

} // namespace orch
