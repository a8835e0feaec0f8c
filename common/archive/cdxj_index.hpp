#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

// A CDXJ index (the form pywb and ReplayWeb.page read): one line per capture,
//   <SURT key> <14-digit timestamp> {"url","mime","status","digest","length","offset","filename"}
// (the digest without its algorithm prefix, as pywb and warcio.js write it)
// for the response, revisit and resource records of WARC files, the lines
// sorted bytewise so a reader can binary-search them.
namespace orch {

class CdxjIndex {
public:
    // Indexes every record of `file` (.warc.gz or .warc) under the name
    // `filename` (its path inside the WACZ's archive/ folder). Records that are
    // not captures, or have no target URI or no valid WARC-Date, get no line.
    // A cut or unreadable tail stops the file there; what was cut is added to
    // notes(). Throws std::system_error when the file cannot be opened or read.
    void add_warc(const std::filesystem::path& file, const std::string& filename);

    // The index text: the lines sorted, each ending in '\n'.
    std::string text() const;
    std::size_t size() const { return m_lines.size(); }
    // One sentence per cut or skipped part of an added file.
    const std::vector<std::string>& notes() const { return m_notes; }

private:
    std::vector<std::string> m_lines;
    std::vector<std::string> m_notes;
};

} // namespace orch
