#include "common/supervision/supervised_tree.hpp"

#include <csignal>

namespace orch {

SupervisedTree::SupervisedTree(std::string id, std::string name, Pidfd leader,
                               std::optional<CgroupLeaf> leaf, SweepTarget sweep,
                               std::optional<double> timeout_s, std::filesystem::path stdout_path,
                               std::filesystem::path stderr_path)
    : m_id(std::move(id)), m_name(std::move(name)), m_leader(std::move(leader)),
      m_leaf(std::move(leaf)), m_sweep(std::move(sweep)), m_timeout_s(timeout_s),
      m_stdout_path(std::move(stdout_path)), m_stderr_path(std::move(stderr_path))
{
}

bool SupervisedTree::empty() const
{
    return m_exit && !has_members();
}

bool SupervisedTree::has_members() const
{
    if (m_leaf) {
        return m_leaf->populated();
    }
    return !find_tree_members(m_sweep).empty();
}

bool SupervisedTree::signal_leader(int sig) const
{
    return !m_exit && m_leader.send_signal(sig);
}

std::size_t SupervisedTree::signal_tree(int sig) const
{
    if (!m_leaf) {
        return sweep_signal(m_sweep, sig);
    }
    std::size_t count = 0;
    for (pid_t pid : m_leaf->members()) {
        // The pid may have been reused since cgroup.procs was read: the
        // membership check after the open proves the pidfd names a member.
        auto pidfd = Pidfd::open(pid);
        if (pidfd && m_leaf->contains(pid) && pidfd->send_signal(sig)) {
            ++count;
        }
    }
    return count;
}

void SupervisedTree::kill_tree()
{
    killed = true;
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
