#pragma once

#include "tests/support/scratch_dir.hpp"

#include <filesystem>
#include <string>
#include <string_view>

// A scratch directory under /tmp (a ScratchDir: removed with its contents on
// destruction, unreadable subdirectories included). Helpers create files relative to it.
namespace orch::test {

class TempTree {
public:
    TempTree();
    TempTree(const TempTree&) = delete;
    TempTree& operator=(const TempTree&) = delete;

    const std::filesystem::path& path() const { return m_dir.path(); }
    // Creates parent directories as needed; returns the file's path.
    std::filesystem::path write(const std::string& rel, std::string_view content, unsigned mode = 0644) const;
    std::filesystem::path mkdir(const std::string& rel) const;

private:
    ScratchDir m_dir;
};

} // namespace orch::test
