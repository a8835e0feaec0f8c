#include "common/recorder/supervisor.hpp"

#include "common/supervision/command_line.hpp"
#include "common/base/errors.hpp"
#include "common/supervision/file_tail.hpp"
#include "common/base/log.hpp"
#include "common/supervision/log_bound.hpp"
#include "common/db/machine.hpp"
#include "common/recorder/process_table.hpp"
#include "common/base/random_id.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace orch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Adopted orphans give no pidfd event, so while anything is supervised the
// loop wakes at least this often to reap them and re-check fallback trees.
constexpr milliseconds k_poll_tick{100};
constexpr milliseconds k_blocked_task_interval{1000};

void epoll_add(int epoll, int fd, std::uint32_t events)
{
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) != 0) {
        throw_errno("epoll_ctl(ADD)");
    }
}

std::string ms(Clock::duration d)
{
    return std::to_string(std::chrono::duration_cast<milliseconds>(d).count());
}

} // namespace

Supervisor::Supervisor(pqxx::connection& conn, SupervisorOptions options)
    : m_conn(conn), m_options(std::move(options)), m_containment(Containment::probe(m_options.containment)),
      m_boot_id(read_boot_id()), m_epoll(::epoll_create1(EPOLL_CLOEXEC)),
      m_timer(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC))
{
    if (!m_epoll || !m_timer) {
        throw_errno("epoll_create1/timerfd_create");
    }
    epoll_add(m_epoll.get(), m_timer.get(), EPOLLIN);
    // Orphaned grandchildren are reparented to us rather than to init, so
    // they can be reaped and never linger as zombies of a dead hook.
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        throw_errno("prctl(PR_SET_CHILD_SUBREAPER)");
    }
    // With SIGCHLD ignored the kernel auto-reaps and waitid cannot report exits.
    struct sigaction current{};
    if (::sigaction(SIGCHLD, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) {
        ::signal(SIGCHLD, SIG_DFL);
    }
    if (m_options.self_row_id) {
        m_self_id = *m_options.self_row_id;
    } else {
        m_self_id = random_uuid();
        auto self = Pidfd::open(::getpid());
        const auto identity = capture_identity(*self, m_boot_id, std::nullopt);
        process_table::NewRow row;
        row.id = m_self_id;
        row.machine_id = m_options.machine_id;
        row.process_type = m_options.self_process_type;
        row.cmd = own_command_line();
        row.pwd = std::filesystem::current_path().string();
        row.containment = std::string(to_string(m_containment.mode()));
        process_table::insert_running(m_conn, row, *identity, ::getpgrp());
        m_owns_self_row = true;
    }
    m_next_heartbeat = Clock::now() + m_options.heartbeat_interval;
    log::info("supervisor ready", {{"containment", std::string(to_string(m_containment.mode()))},
                                   {"self", m_self_id},
                                   {"scope_dir", m_containment.scope_dir().string()}});
    arm_timer(Clock::now());
}

Supervisor::~Supervisor()
{
    try {
        if (!m_trees.empty()) {
            log::warn("supervisor destroyed with live trees; tearing them down",
                      {{"count", std::to_string(m_trees.size())}});
            // The loop that would have taken a pending stop is gone (unwound by
            // a database outage given up on because of that very stop): it is
            // the first stop, and the trees get their grace. Taken, not peeked
            // at, so that only a further one kills them at once.
            if (m_options.stop_signals != nullptr) {
                m_options.stop_signals->take();
            }
            teardown();
        }
        stop_adopted_orphans();
        release_reservations();
        write_held_exits();
        m_trees.clear();
        m_spare_leaves.clear();
        m_containment.remove_group(m_self_id);
        if (m_containment.uses_cgroups()) {
            ::rmdir(m_containment.scope_dir().c_str()); // only succeeds when no other supervisor uses it
        }
        if (m_owns_self_row) {
            // Its own usage so far: a process nobody waits for (a worker run by
            // hand) still has it, and a parent's reap later overwrites it with the
            // kernel's final figure.
            process_table::mark_exited(m_conn, m_self_id,
                                       {std::nullopt, std::nullopt, "exited", {}, {}, ResourceUsage::of_self_and_reaped()});
        }
    } catch (const std::exception& e) {
        log::error("supervisor shutdown failed", {{"error", e.what()}});
        // The teardown stopped at a database error (a PostgreSQL restart is a
        // common reason to be tearing down at all): no process outlives us
        // anyway. A cgroup leaf would kill its tree when destroyed; a fallback
        // tree has nothing else.
        for (auto& [id, tree] : m_trees) {
            try {
                tree->kill_tree();
            } catch (const std::exception& kill_error) {
                log::error("cannot kill a tree left by a failed shutdown",
                           {{"process", id}, {"error", kill_error.what()}});
            }
        }
    }
}

void Supervisor::track(std::unique_ptr<SupervisedTree> tree)
{
    epoll_add(m_epoll.get(), tree->leader().fd(), EPOLLIN);
    if (tree->events_fd() >= 0) {
        epoll_add(m_epoll.get(), tree->events_fd(), EPOLLPRI | EPOLLET);
    }
    const auto id = tree->row_id();
    m_trees.emplace(id, std::move(tree));
    arm_timer(Clock::now());
}

SupervisedTree* Supervisor::find(const std::string& row_id)
{
    const auto it = m_trees.find(row_id);
    return it == m_trees.end() ? nullptr : it->second.get();
}

bool Supervisor::is_running(const std::string& row_id) const
{
    return m_trees.count(row_id) != 0;
}

bool Supervisor::left_processes(const std::string& row_id) const
{
    const auto it = m_trees.find(row_id);
    return it != m_trees.end() && it->second->leader_exit() && !it->second->claimed && !it->second->empty();
}

std::vector<std::string> Supervisor::running() const
{
    std::vector<std::string> ids;
    for (const auto& [id, tree] : m_trees) {
        ids.push_back(id);
    }
    return ids;
}

void Supervisor::process_events()
{
    InFlightGuard guard{*this};
    handle_events();
    settle_write();
}

void Supervisor::handle_events()
{
    epoll_event events[64];
    int n;
    do {
        n = ::epoll_wait(m_epoll.get(), events, 64, 0);
    } while (n < 0 && errno == EINTR);
    std::uint64_t expirations = 0;
    while (::read(m_timer.get(), &expirations, sizeof expirations) > 0) {
    }
    for (auto& [id, tree] : m_trees) {
        if (!tree->leader_exit() && tree->leader().has_exited()) {
            if (auto exit = tree->leader().try_reap()) {
                on_leader_exit(*tree, *exit);
            }
        }
    }
    reap_orphans();
    collect_finished();
    deferrable([this] { flush_due_running(); });
    deferrable([this] { flush_due_exits(); });
    if (Clock::now() >= m_next_heartbeat) {
        deferrable([this] { heartbeat(); });
    }
    if (Clock::now() >= m_next_log_check) {
        // A hook that floods its output must not fill the disk.
        for (const auto& [id, tree] : m_trees) {
            bound_logs(*tree);
        }
        m_next_log_check = Clock::now() + std::chrono::milliseconds(250);
    }
    arm_timer(Clock::now());
}

void Supervisor::on_leader_exit(SupervisedTree& tree, const ProcessExit& exit)
{
    tree.set_leader_exit(exit);
    ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, tree.leader().fd(), nullptr);
    const auto elapsed = Clock::now() - tree.started();
    record_exit(tree.row_id(),
                {exit.exit_code, exit.term_signal, tree.end_reason,
                 read_log_tail(tree.stdout_path(), m_options.tail_bytes),
                 read_log_tail(tree.stderr_path(), m_options.tail_bytes), exit.usage},
                tree.hold_exit && !tree.claimed);
    tree.recorded = true;
    if (const auto level = tree.owner_logs ? log::Level::debug : log::Level::info; log::enabled(level)) {
        log::write(level, "process exited",
                   {{"process", tree.row_id()}, {"name", tree.name()}, {"exit_code", std::to_string(exit.exit_code)},
                    {"signal", exit.term_signal ? std::to_string(*exit.term_signal) : ""},
                    {"end_reason", tree.end_reason}, {"elapsed_ms", ms(elapsed)}});
    }
}

void Supervisor::reap_orphans()
{
    for (;;) {
        siginfo_t info{};
        // Peek first: a tracked leader must be reaped through its pidfd so
        // its status is recorded, everything else is an adopted orphan.
        if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) {
            return;
        }
        const pid_t pid = info.si_pid;
        const auto it = std::find_if(m_trees.begin(), m_trees.end(), [pid](const auto& entry) {
            return !entry.second->leader_exit() && entry.second->pid() == pid;
        });
        if (it != m_trees.end()) {
            if (auto exit = it->second->leader().try_reap()) {
                on_leader_exit(*it->second, *exit);
            }
            continue;
        }
        siginfo_t reaped{};
        ::waitid(P_PID, static_cast<id_t>(pid), &reaped, WEXITED | WNOHANG);
    }
}

ProcessOutcome Supervisor::outcome_of(const SupervisedTree& tree) const
{
    ProcessOutcome outcome;
    outcome.row_id = tree.row_id();
    if (tree.leader_exit()) {
        outcome.exit_code = tree.leader_exit()->exit_code;
        outcome.term_signal = tree.leader_exit()->term_signal;
    }
    outcome.end_reason = tree.end_reason;
    outcome.timed_out = tree.timed_out;
    outcome.killed = tree.killed;
    outcome.stop_signalled = tree.stop_signalled;
    outcome.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - tree.started());
    return outcome;
}

void Supervisor::bound_logs(const SupervisedTree& tree)
{
    for (const auto* path : {&tree.stdout_path(), &tree.stderr_path()}) {
        if (bound_log_file(*path, m_options.max_log_bytes) > 0 && m_bounded_logs.insert(path->string()).second) {
            log::warn("log over its limit: dropping its oldest output from now on",
                      {{"process", tree.row_id()}, {"path", path->string()},
                       {"max_bytes", std::to_string(m_options.max_log_bytes)}});
        }
    }
}

void Supervisor::finish(SupervisedTree& tree, bool tree_empty)
{
    // A writer faster than the periodic check may have overshot the bound: the
    // last pass, with every writer gone, leaves the log within it.
    bound_logs(tree);
    auto outcome = outcome_of(tree);
    outcome.tree_empty = tree_empty;
    if (tree.events_fd() >= 0) {
        ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, tree.events_fd(), nullptr);
    }
    if (tree_empty && !tree.killed && m_spare_leaves.size() < k_max_spare_leaves) {
        // An empty cgroup2 leaf is as good as a new one: the next hook is born
        // into it, and a mkdir, an rmdir and three opens are saved.
        if (auto leaf = tree.take_leaf(); leaf && leaf->kind() == CgroupLeaf::Kind::cgroup2) {
            m_spare_leaves.push_back(std::move(*leaf));
        }
    }
    if (tree_empty) {
        tree.release();
    }
    if (!tree.leader_exit()) {
        ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, tree.leader().fd(), nullptr);
    }
    if (tree.claimed) {
        m_done[tree.row_id()] = outcome;
    } else {
        m_finished.push_back(outcome);
    }
    m_trees.erase(tree.row_id());
}

void Supervisor::collect_finished()
{
    std::vector<SupervisedTree*> done;
    for (auto& [id, tree] : m_trees) {
        if (tree->leader_exit() && !tree->claimed && tree->empty()) {
            done.push_back(tree.get());
        }
    }
    for (auto* tree : done) {
        finish(*tree, true);
    }
}

std::vector<ProcessOutcome> Supervisor::take_finished()
{
    return std::exchange(m_finished, {});
}

RecoveryReport Supervisor::recover(milliseconds grace)
{
    RecoveryOptions options;
    options.containment = m_options.containment;
    options.self_row_id = m_self_id;
    options.grace = grace;
    options.kill_timeout = m_options.kill_timeout;
    InFlightGuard guard{*this};
    auto report = cleanup_stale_running(m_conn, m_options.machine_id, options);
    reap_orphans(); // may send an exit write
    settle_write();
    return report;
}

void Supervisor::heartbeat()
{
    settle_write();
    std::vector<std::string> ids{m_self_id};
    for (const auto& [id, tree] : m_trees) {
        if (!tree->recorded) {
            ids.push_back(id);
        }
    }
    process_table::heartbeat(m_conn, ids);
    m_next_heartbeat = Clock::now() + m_options.heartbeat_interval;
}

void Supervisor::arm_timer(Clock::time_point now)
{
    auto next = m_next_heartbeat;
    if (!m_trees.empty()) {
        next = std::min(next, now + k_poll_tick);
    }
    for (const auto& [id, pending] : m_pending_running) {
        next = std::min(next, pending.spawned + k_running_write_delay);
    }
    if (!m_held_exits.empty()) {
        next = std::min(next, m_held_exits.front().ended + m_options.exit_write_delay);
    }
    const auto delay = std::max(next - now, Clock::duration(std::chrono::microseconds(100)));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(delay).count();
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    if (::timerfd_settime(m_timer.get(), 0, &spec, nullptr) != 0) {
        throw_errno("timerfd_settime");
    }
}

void Supervisor::wait_until(Clock::time_point until)
{
    const auto now = Clock::now();
    auto wait = k_poll_tick;
    if (until <= now) {
        wait = milliseconds(0);
    } else if (until - now < k_poll_tick) {
        // Round up: waking a little late beats spinning until the deadline.
        wait = std::chrono::ceil<milliseconds>(until - now);
    }
    epoll_event events[16];
    int n;
    do {
        n = ::epoll_wait(m_epoll.get(), events, 16, static_cast<int>(wait.count()));
    } while (n < 0 && errno == EINTR);
    handle_events();
    if (m_while_blocked && Clock::now() >= m_next_blocked_task) {
        m_next_blocked_task = Clock::now() + k_blocked_task_interval;
        try {
            settle_write(); // the owner's statement must not meet one of ours in flight
            m_while_blocked();
        } catch (const std::exception& e) {
            log::warn("owner's task during a blocking wait failed", {{"error", e.what()}});
        }
    }
}

void Supervisor::set_while_blocked(std::function<void()> task)
{
    m_while_blocked = std::move(task);
    m_next_blocked_task = Clock::now() + k_blocked_task_interval;
}

} // namespace orch
