#include "tests/support/scratch_dir.hpp"

#include "common/base/errors.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdlib.h>
#include <system_error>
#include <utility>

namespace fs = std::filesystem;

namespace orch::test {
namespace {

// Removes `dir` and everything under it; false (and `ec` set) when something stays.
bool remove_tree(const fs::path& dir, std::error_code& ec) noexcept
{
    try {
        // Tests leave directories without permissions (to provoke errors); give them
        // back so that remove_all can descend. The iterator visits a directory before
        // entering it, so each is fixed in time. Symlinks are not followed: they may
        // point outside the tree.
        std::error_code ignored;
        if (fs::symlink_status(dir, ignored).type() == fs::file_type::directory) {
            fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ignored);
            std::error_code walk;
            for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, walk), end;
                 !walk && it != end; it.increment(walk)) {
                if (it->symlink_status(ignored).type() == fs::file_type::directory) {
                    fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ignored);
                }
            }
        }
        ec.clear();
        fs::remove_all(dir, ec);
        return !ec;
    } catch (const std::exception&) {
        // Only allocation can throw on these non-throwing overloads.
        ec = std::make_error_code(std::errc::not_enough_memory);
        return false;
    }
}

} // namespace

ScratchDir::ScratchDir(const std::string& prefix)
{
    const char* base = std::getenv("TMPDIR");
    std::string templ = (base != nullptr && *base != '\0' ? std::string(base) : std::string("/tmp")) + "/" + prefix + "XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
        throw_errno("mkdtemp " + templ);
    }
    m_path = std::move(templ);
}

ScratchDir::~ScratchDir()
{
    if (m_path.empty()) {
        return;
    }
    // fprintf, not iostreams: nothing here may throw, and this may run during unwinding.
    if (std::getenv("ORCH_KEEP_TEST_DIRS") != nullptr) {
        std::fprintf(stderr, "kept scratch dir %s (ORCH_KEEP_TEST_DIRS is set)\n", m_path.c_str());
        return;
    }
    std::error_code ec;
    if (!remove_tree(m_path, ec)) {
        std::fprintf(stderr, "warning: could not remove scratch dir %s: %s\n", m_path.c_str(),
                     std::strerror(ec.value()));
    }
}

ScratchDir::ScratchDir(ScratchDir&& other) noexcept : m_path(other.release()) {}

ScratchDir& ScratchDir::operator=(ScratchDir&& other) noexcept
{
    if (this != &other) {
        ScratchDir previous(std::move(*this)); // removed at the end of this block
        m_path = other.release();
    }
    return *this;
}

fs::path ScratchDir::release()
{
    return std::exchange(m_path, fs::path());
}

} // namespace orch::test
