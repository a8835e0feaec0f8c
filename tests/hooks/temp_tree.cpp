#include "tests/hooks/temp_tree.hpp"

#include <fstream>
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace orch::test {

TempTree::TempTree() : m_dir("orch_hooks_test_") {}

fs::path TempTree::write(const std::string& rel, std::string_view content, unsigned mode) const
{
    fs::path p = m_dir / rel;
    fs::create_directories(p.parent_path());
    {
        std::ofstream out(p, std::ios::binary | std::ios::trunc);
        out.write(content.data(), static_cast<std::streamsize>(content.size()));
    }
    ::chmod(p.c_str(), mode);
    return p;
}

fs::path TempTree::mkdir(const std::string& rel) const
{
    fs::path p = m_dir / rel;
    fs::create_directories(p);
    return p;
}

} // namespace orch::test
