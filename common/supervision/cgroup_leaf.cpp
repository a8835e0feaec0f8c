#include "common/supervision/cgroup_leaf.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/supervision/pidfd.hpp"

#include <chrono>
#include <csignal>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace orch {
namespace {

void write_file(const std::filesystem::path& path, const std::string& value)
{
    Fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) {
        throw_errno("open " + path.string());
    }
    if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size())) {
        throw_errno("write " + path.string());
    }
}

std::string read_file(const std::filesystem::path& path)
{
    return read_whole_file(path.string()).value_or(std::string());
}

} // namespace

CgroupLeaf::CgroupLeaf(std::filesystem::path dir, Kind kind) : m_dir(std::move(dir)), m_kind(kind)
{
    if (m_kind == Kind::cgroup2) {
        // The directory first: its files are then opened relative to it,
        // without walking the long cgroupfs path again.
        m_dir_fd.reset(::open(m_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!m_dir_fd) {
            throw_errno("open " + m_dir.string());
        }
        m_procs.reset(::openat(m_dir_fd.get(), "cgroup.procs", O_WRONLY | O_CLOEXEC));
    } else {
        m_procs.reset(::open((m_dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    }
    if (!m_procs) {
        throw_errno("open " + (m_dir / "cgroup.procs").string());
    }
    if (m_kind == Kind::cgroup2) {
        m_events.reset(::openat(m_dir_fd.get(), "cgroup.events", O_RDONLY | O_CLOEXEC));
        if (!m_events) {
            throw_errno("open " + (m_dir / "cgroup.events").string());
        }
    }
    m_removed = false;
}

CgroupLeaf CgroupLeaf::create(const std::filesystem::path& dir, Kind kind)
{
    // The parent (the supervisor's group) exists for every leaf but its first:
    // one mkdir instead of create_directories' stat of every component.
    if (::mkdir(dir.c_str(), 0755) != 0) {
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        if (ec) {
            throw std::system_error(ec, "mkdir " + dir.string());
        }
    }
    return CgroupLeaf(dir, kind);
}

CgroupLeaf CgroupLeaf::adopt(const std::filesystem::path& dir, Kind kind)
{
    return CgroupLeaf(dir, kind);
}

CgroupLeaf::CgroupLeaf(CgroupLeaf&& other) noexcept
    : m_dir(std::move(other.m_dir)), m_kind(other.m_kind), m_procs(std::move(other.m_procs)),
      m_dir_fd(std::move(other.m_dir_fd)), m_events(std::move(other.m_events)), m_removed(std::exchange(other.m_removed, true))
{
}

CgroupLeaf& CgroupLeaf::operator=(CgroupLeaf&& other) noexcept
{
    if (this != &other) {
        // The leaf held so far is released as its destructor would.
        CgroupLeaf released(std::move(*this));
        m_dir = std::move(other.m_dir);
        m_kind = other.m_kind;
        m_procs = std::move(other.m_procs);
        m_dir_fd = std::move(other.m_dir_fd);
        m_events = std::move(other.m_events);
        m_removed = std::exchange(other.m_removed, true);
    }
    return *this;
}

CgroupLeaf::~CgroupLeaf()
{
    if (m_removed) {
        return;
    }
    try {
        if (populated()) {
            log::warn("cgroup leaf still populated on release; killing it", {{"cgroup", m_dir.string()}});
            kill();
        }
        remove();
    } catch (const std::exception& e) {
        log::error("cgroup leaf cleanup failed", {{"cgroup", m_dir.string()}, {"error", e.what()}});
    }
}

std::vector<pid_t> CgroupLeaf::members() const
{
    std::vector<pid_t> pids;
    std::istringstream in(read_file(m_dir / "cgroup.procs"));
    pid_t pid = 0;
    while (in >> pid) {
        pids.push_back(pid);
    }
    return pids;
}

bool CgroupLeaf::contains(pid_t pid) const
{
    // The leaf's last two path components (supervisor row, hook row) are
    // UUIDs, so a suffix match on a line of /proc/<pid>/cgroup is exact, in
    // the cgroup2 line ("0::/...") as in the freezer's ("N:freezer:/...").
    const std::string suffix = "/" + m_dir.parent_path().filename().string() + "/" + m_dir.filename().string();
    // The process may exit while we read: read_file makes that "not in it".
    std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/cgroup"));
    std::string line;
    while (std::getline(in, line)) {
        if (line.size() >= suffix.size() && line.compare(line.size() - suffix.size(), suffix.size(), suffix) == 0) {
            return true;
        }
    }
    return false;
}

bool CgroupLeaf::populated() const
{
    if (m_kind == Kind::cgroup2) {
        // Through the descriptor we hold (one pread, no path walk). Reading it
        // also marks its change notification seen, which loses nothing: what
        // we read is the state now, and a later flip notifies again.
        char buf[128];
        if (m_events) {
            const auto n = ::pread(m_events.get(), buf, sizeof buf, 0);
            if (n >= 0) {
                return std::string_view(buf, static_cast<std::size_t>(n)).find("populated 1") != std::string_view::npos;
            }
        }
        const std::string events = read_file(m_dir / "cgroup.events");
        return events.find("populated 1") != std::string::npos;
    }
    return !members().empty();
}

void CgroupLeaf::kill() const
{
    if (m_kind == Kind::cgroup2) {
        write_file(m_dir / "cgroup.kill", "1");
        return;
    }
    // v1 has no cgroup.kill: freezing first means no member can fork while
    // the list is being killed; the SIGKILLs land when the cgroup thaws.
    write_file(m_dir / "freezer.state", "FROZEN");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    bool frozen = false;
    while (!(frozen = read_file(m_dir / "freezer.state").find("FROZEN") == 0) &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (pid_t pid : members()) {
        if (frozen) {
            // A frozen member cannot exit, so its pid cannot be freed and
            // reused between reading cgroup.procs and this kill.
            ::kill(pid, SIGKILL);
        } else if (auto pidfd = Pidfd::open(pid); pidfd && contains(pid)) {
            // Still FREEZING: a member may exit and its pid be reused after
            // the list was read. The pidfd pins whichever process has the pid
            // now, and it is signalled only if that one is in the leaf.
            pidfd->send_signal(SIGKILL);
        }
    }
    write_file(m_dir / "freezer.state", "THAWED");
}

bool CgroupLeaf::remove()
{
    if (m_removed) {
        return true;
    }
    m_procs.reset();
    m_dir_fd.reset();
    m_events.reset();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (;;) {
        if (::rmdir(m_dir.c_str()) == 0 || errno == ENOENT) {
            m_removed = true;
            return true;
        }
        if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline) {
            log::warn("cannot remove cgroup leaf", {{"cgroup", m_dir.string()}, {"errno", std::to_string(errno)}});
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

} // namespace orch
