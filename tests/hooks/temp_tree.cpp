#include "tests/hooks/temp_tree.hpp"

#include "common/errors.hpp"

#include <fstream>
#include <stdlib.h>
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace orch::test {

TempTree::TempTree()
{
    std::string templ = "/tmp/orch_hooks_test_XXXXXX";
    if (!::mkdtemp(templ.data())) {
        throw_errno("mkdtemp");
    }
    m_path = templ;
}

TempTree::~TempTree()
{
    std::error_code ec;
    // Tests may leave directories without permissions; restore them so that
    // remove_all can descend.
    for (auto it = fs::recursive_directory_iterator(m_path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        if (it->is_directory(ec) && !it->is_symlink(ec)) {
            fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
        }
    }
    fs::remove_all(m_path, ec);
}

fs::path TempTree::write(const std::string& rel, std::string_view content, unsigned mode) const
{
    fs::path p = m_path / rel;
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
    fs::path p = m_path / rel;
    fs::create_directories(p);
    return p;
}

} // namespace orch::test
