#include "common/supervised_tree.hpp"

#include "common/fd.hpp"

#include <csignal>
#include <sstream>

namespace orch {

SupervisedTree::SupervisedTree(std::string row_id, std::string name, Pidfd leader,
                               std::optional<CgroupLeaf> leaf, SweepTarget sweep,
                               std::optional<double> timeout_s, std::filesystem::path stdout_path,
                               std::filesystem::path stderr_path)
    : m_row_id(std::move(row_id)), m_name(std::move(name)), m_leader(std::move(leader)),
      m_leaf(std::move(leaf)), m_sweep(std::move(sweep)), m_timeout_s(timeout_s),
      m_stdout_path(std::move(stdout_path)), m_stderr_path(std::move(stderr_path))
{
}

bool SupervisedTree::empty() const
{
    if (!m_exit) {
        return false;
    }
    if (m_leaf) {
        return !m_leaf->populated();
    }
    return find_tree_members(m_sweep).empty();
}

bool SupervisedTree::signal_leader(int sig) const
{
    return !m_exit && m_leader.send_signal(sig);
}

bool SupervisedTree::in_leaf(pid_t pid) const
{
    // The leaf's last two path components (supervisor row, hook row) are
    // UUIDs, so a suffix match on /proc/<pid>/cgroup is exact.
    const std::string suffix =
        "/" + m_leaf->path().parent_path().filename().string() + "/" + m_leaf->path().filename().string();
    // The process may exit while we read: read_whole_file makes that "not in it".
    std::istringstream in(read_whole_file("/proc/" + std::to_string(pid) + "/cgroup").value_or(std::string()));
    std::string line;
    while (std::getline(in, line)) {
        if (line.size() >= suffix.size() && line.compare(line.size() - suffix.size(), suffix.size(), suffix) == 0) {
            return true;
        }
    }
    return false;
}

std::size_t SupervisedTree::signal_tree(int sig) const
{
    if (!m_leaf) {
        return sweep_signal(m_sweep, sig);
    }
    std::size_t count = 0;
    for (pid_t pid : m_leaf->members()) {
        auto pidfd = Pidfd::open(pid);
        if (pidfd && in_leaf(pid) && pidfd->send_signal(sig)) {
            ++count;
        }
    }
    return count;
}

void SupervisedTree::kill_tree() const
{
    if (m_leaf) {
        m_leaf->kill();
        return;
    }
    if (!m_exit) {
        m_leader.send_signal(SIGKILL);
    }
    sweep_kill_until_empty(m_sweep);
}

bool SupervisedTree::release()
{
    return !m_leaf || m_leaf->remove();
}

std::optional<SupervisedTree::Clock::duration> SupervisedTree::remaining(Clock::time_point now) const
{
    if (!m_timeout_s) {
        return std::nullopt;
    }
    const auto budget = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*m_timeout_s));
    const auto used = now - m_started;
    return used >= budget ? Clock::duration::zero() : budget - used;
}

} // namespace orch
