#pragma once

#include "common/supervision/cgroup_leaf.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace orch {

enum class ContainmentMode { cgroup2, freezer, fallback };

std::string_view to_string(ContainmentMode mode);

struct ContainmentOptions {
    // Hook cgroups live in <mount>/<root_name>/<scope>/<supervisor-row>/<hook-row>,
    // so different data directories (scope) and parallel test runs never see
    // each other's hooks.
    std::string root_name = "archive-orch";
    std::string scope = "default";
    // Skip the probe and use the subreaper/pgid/cookie fallback. The
    // environment variable ORCH_CONTAINMENT=fallback|freezer|cgroup2 also
    // forces a mode (cgroup modes only if the probe allows them).
    bool force_fallback = false;
    // Where cgroup hierarchies are mounted (tests may point elsewhere).
    std::filesystem::path cgroup_root = "/sys/fs/cgroup";
};


// The containment mode of this machine, probed once. Cheap to copy.
class Containment {
public:
    // Probes cgroup2 (a writable leaf with cgroup.kill), then the v1 freezer,
    // else fallback; logs the result. Never throws for an unusable mode; throws
    // ConfigError for a malformed ORCH_CONTAINMENT.
    static Containment probe(const ContainmentOptions& options);
    // A fallback-mode value without probing (tests, containers).
    static Containment fallback(const ContainmentOptions& options);

    ContainmentMode mode() const noexcept { return m_mode; }
    bool uses_cgroups() const noexcept { return m_mode != ContainmentMode::fallback; }
    // <mount>/<root_name>/<scope>; empty in fallback mode.
    const std::filesystem::path& scope_dir() const noexcept { return m_scope_dir; }

    // Directory of one supervisor's hooks; empty in fallback mode.
    std::filesystem::path group_dir(const std::string& supervisor_id) const;
    // Creates the leaf <group_dir>/<hook_id>. Only in a cgroup mode; throws
    // std::system_error if the directory cannot be made.
    CgroupLeaf create_leaf(const std::string& supervisor_id, const std::string& hook_id) const;
    // Supervisor directories under scope_dir() (recovery). Empty in fallback.
    std::vector<std::string> list_groups() const;
    // Hook leaves under one supervisor directory (recovery).
    std::vector<std::string> list_leaves(const std::string& supervisor_id) const;
    // Adopts an existing leaf (recovery).
    CgroupLeaf adopt_leaf(const std::string& supervisor_id, const std::string& hook_id) const;
    // rmdir of an empty supervisor directory; false if not empty or absent.
    bool remove_group(const std::string& supervisor_id) const;
    // True if process `pid` runs in a cgroup under scope_dir() now, read from
    // /proc/<pid>/cgroup (false once it has exited, and in fallback mode).
    bool holds(pid_t pid) const;

private:
    ContainmentMode m_mode = ContainmentMode::fallback;
    std::filesystem::path m_scope_dir;
};

} // namespace orch
