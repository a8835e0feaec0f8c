#include "common/supervision/containment.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/config/settings.hpp"

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace orch {
namespace {

bool is_cgroup2_mount(const std::filesystem::path& dir)
{
    struct statfs fs{};
    return ::statfs(dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == CGROUP2_SUPER_MAGIC;
}

std::filesystem::path find_cgroup2_mount(const std::filesystem::path& root)
{
    // Unified layout mounts cgroup2 at the root; hybrid layouts at unified/.
    for (const auto& candidate : {root, root / "unified"}) {
        if (is_cgroup2_mount(candidate)) {
            return candidate;
        }
    }
    return {};
}

// A leaf is usable if we can make it, it has the file we need, and we can
// remove it again; anything else (read-only cgroupfs in containers) means no.
bool probe_leaf(const std::filesystem::path& scope, const char* required_file)
{
    std::error_code ec;
    std::filesystem::create_directories(scope, ec);
    if (ec) {
        return false;
    }
    const auto probe = scope / (".probe-" + std::to_string(::getpid()));
    if (::mkdir(probe.c_str(), 0755) != 0 && errno != EEXIST) {
        return false;
    }
    const bool usable = ::access((probe / required_file).c_str(), W_OK) == 0 &&
                        ::access((probe / "cgroup.procs").c_str(), W_OK) == 0;
    ::rmdir(probe.c_str());
    return usable;
}

CgroupLeaf::Kind leaf_kind(ContainmentMode mode)
{
    return mode == ContainmentMode::freezer ? CgroupLeaf::Kind::freezer : CgroupLeaf::Kind::cgroup2;
}

} // namespace

std::string_view to_string(ContainmentMode mode)
{
    switch (mode) {
    case ContainmentMode::cgroup2: return "cgroup2";
    case ContainmentMode::freezer: return "freezer";
    case ContainmentMode::fallback: return "fallback";
    }
    return "fallback";
}

Containment Containment::fallback(const ContainmentOptions&)
{
    return Containment{};
}

Containment Containment::probe(const ContainmentOptions& options)
{
    const std::string wanted = forced_containment_from_env();
    Containment result;
    if (options.force_fallback || wanted == "fallback") {
        log::info("containment forced to fallback", {{"containment", "fallback"}});
        return result;
    }
    const auto v2 = find_cgroup2_mount(options.cgroup_root);
    const auto v2_scope = v2 / options.root_name / options.scope;
    const auto v1_scope = options.cgroup_root / "freezer" / options.root_name / options.scope;
    if (wanted != "freezer" && !v2.empty() && probe_leaf(v2_scope, "cgroup.kill")) {
        result.m_mode = ContainmentMode::cgroup2;
        result.m_scope_dir = v2_scope;
    } else if (std::filesystem::exists(options.cgroup_root / "freezer" / "freezer.state") ||
               std::filesystem::exists(options.cgroup_root / "freezer" / "cgroup.procs")) {
        if (probe_leaf(v1_scope, "freezer.state")) {
            result.m_mode = ContainmentMode::freezer;
            result.m_scope_dir = v1_scope;
        }
    }
    // A process probes once per supervisor and once for recovery (the
    // orchestrator three times at start): the result is news once, unless it
    // changes.
    static std::mutex logged_mutex;
    static std::set<std::string> logged;
    const std::string seen = std::string(to_string(result.m_mode)) + " " + result.m_scope_dir.string();
    bool first = false;
    {
        std::lock_guard<std::mutex> lock(logged_mutex);
        first = logged.insert(seen).second;
    }
    log::write(first ? log::Level::info : log::Level::debug, "containment probed",
               {{"containment", std::string(to_string(result.m_mode))}, {"scope_dir", result.m_scope_dir.string()}});
    return result;
}

std::filesystem::path Containment::group_dir(const std::string& supervisor_id) const
{
    return uses_cgroups() ? m_scope_dir / supervisor_id : std::filesystem::path{};
}

CgroupLeaf Containment::create_leaf(const std::string& supervisor_id, const std::string& hook_id) const
{
    return CgroupLeaf::create(group_dir(supervisor_id) / hook_id, leaf_kind(m_mode));
}

CgroupLeaf Containment::adopt_leaf(const std::string& supervisor_id, const std::string& hook_id) const
{
    return CgroupLeaf::adopt(group_dir(supervisor_id) / hook_id, leaf_kind(m_mode));
}

namespace {

std::vector<std::string> list_subdirs(const std::filesystem::path& dir)
{
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const auto name = entry.path().filename().string();
        if (entry.is_directory(ec) && !name.empty() && name[0] != '.') {
            names.push_back(name);
        }
    }
    return names;
}

} // namespace

std::vector<std::string> Containment::list_groups() const
{
    return uses_cgroups() ? list_subdirs(m_scope_dir) : std::vector<std::string>{};
}

std::vector<std::string> Containment::list_leaves(const std::string& supervisor_id) const
{
    return uses_cgroups() ? list_subdirs(group_dir(supervisor_id)) : std::vector<std::string>{};
}

bool Containment::remove_group(const std::string& supervisor_id) const
{
    return uses_cgroups() && ::rmdir(group_dir(supervisor_id).c_str()) == 0;
}

bool Containment::holds(pid_t pid) const
{
    if (!uses_cgroups()) {
        return false;
    }
    // The scope's last two components (root name, scope) in the path of a
    // cgroup2 line ("0::/...") or a freezer line ("N:freezer:/..."); scopes
    // are per data directory or per test, so the match names ours alone.
    const std::string part =
        "/" + m_scope_dir.parent_path().filename().string() + "/" + m_scope_dir.filename().string() + "/";
    std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        if (line.find(part) != std::string::npos) {
            return true;
        }
    }
    return false;
}

} // namespace orch
