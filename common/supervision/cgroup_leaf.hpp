#pragma once

#include "common/base/fd.hpp"

#include <cstdint>
#include <filesystem>
#include <vector>

#include <sys/types.h>

namespace orch {

// One hook's cgroup directory (a cgroup2 leaf or a v1 freezer cgroup). Owns
// the directory and its descriptors: the destructor kills whatever is still
// inside and removes the directory, so a leaf never leaks processes. Not
// thread-safe. Throws std::system_error on failed syscalls.
class CgroupLeaf {
public:
    enum class Kind { cgroup2, freezer };

    // Creates the directory (parents included). Throws if it cannot.
    static CgroupLeaf create(const std::filesystem::path& dir, Kind kind);
    // Takes ownership of an existing directory (crash recovery).
    static CgroupLeaf adopt(const std::filesystem::path& dir, Kind kind);

    // A moved-from leaf owns nothing: its destructor touches no cgroup.
    CgroupLeaf(CgroupLeaf&& other) noexcept;
    CgroupLeaf& operator=(CgroupLeaf&& other) noexcept;
    CgroupLeaf(const CgroupLeaf&) = delete;
    CgroupLeaf& operator=(const CgroupLeaf&) = delete;
    ~CgroupLeaf();

    const std::filesystem::path& path() const noexcept { return m_dir; }
    Kind kind() const noexcept { return m_kind; }

    // Write end of cgroup.procs, for a child to join between fork and exec
    // (write its own pid, async-signal-safe). Valid until remove().
    int procs_fd() const noexcept { return m_procs.get(); }
    // The leaf directory itself (cgroup2 only, else -1), for clone3's
    // CLONE_INTO_CGROUP: the child is born inside, with no migration. Valid
    // until remove().
    int dir_fd() const noexcept { return m_dir_fd.get(); }
    // cgroup.events (cgroup2 only, else -1): EPOLLPRI when `populated` flips.
    int events_fd() const noexcept { return m_events.get(); }

    // Pids in the leaf now (may include zombies on some kernels).
    std::vector<pid_t> members() const;
    // True if process `pid` is in this leaf now, read from /proc/<pid>/cgroup
    // (false once it has exited). A pid from members() may have been reused
    // by the time it is opened: open a pidfd first, then check this, and
    // signal through the pidfd only if it holds.
    bool contains(pid_t pid) const;
    // True while any process is in the leaf. Non-blocking.
    bool populated() const;
    // SIGKILLs every process in the leaf, including ones forking right now:
    // cgroup.kill on cgroup2; freeze, kill, thaw on the v1 freezer.
    void kill() const;
    // Removes the directory; retries briefly on EBUSY (right after a kill the
    // kernel may still hold it). Returns false if it is still populated or
    // busy. Idempotent.
    bool remove();

private:
    CgroupLeaf(std::filesystem::path dir, Kind kind);

    std::filesystem::path m_dir;
    Kind m_kind = Kind::cgroup2;
    Fd m_procs;
    Fd m_dir_fd;
    Fd m_events;
    bool m_removed = true;
};

} // namespace orch
