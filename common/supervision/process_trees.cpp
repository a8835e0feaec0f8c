#include "common/supervision/process_trees.hpp"

#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/supervision/child_environment.hpp"
#include "common/supervision/log_bound.hpp"
#include "common/supervision/rerun_script.hpp"

#include <algorithm>
#include <csignal>
#include <fstream>
#include <thread>
#include <utility>

#include <poll.h>
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

// Where a process's files go: <base>.stdout.log, <base>.stderr.log, <base>.cmd.sh.
std::string file_base(const LaunchRequest& request, const std::string& id)
{
    return (request.log_dir / (request.name + "." + id)).string();
}

// Phase 1 for one tree. SIGCONT follows SIGTERM so a stopped process can act
// on it. Returns true when every member got the signal, false when only the
// leader did.
bool send_term(SupervisedTree& tree, TermTarget target)
{
    // Whether the stop can have ended the leader: one already exited ended on
    // its own (a signal to a zombie is accepted and does nothing).
    tree.stop_signalled = tree.stop_signalled || !tree.leader().has_exited();
    // A leader that has exited but is not reaped yet is a zombie: the kernel
    // accepts the signal, yet nobody is left to pass it on to the children.
    if (target == TermTarget::leader && !tree.leader().has_exited() && tree.signal_leader(SIGTERM)) {
        tree.signal_leader(SIGCONT);
        return false;
    }
    // No leader left to pass the signal on: every member gets it.
    tree.signal_tree(SIGTERM);
    tree.signal_tree(SIGCONT);
    return true;
}

// A timeout's phase 1, for wait() and keep_deadlines() alike: the tree is
// timed out from here on, and its SIGKILL is due at `kill_at`.
void stop_for_timeout(SupervisedTree& tree, Clock::time_point kill_at)
{
    tree.timed_out = true;
    tree.end_reason = "timed_out";
    send_term(tree, TermTarget::leader);
    tree.kill_at = kill_at;
}

struct TeardownEntry {
    std::string id;
    Clock::time_point deadline;
    Clock::time_point give_up = Clock::time_point::max();
    bool tree_termed = false; // every member has had its SIGTERM
    bool done = false;
};

bool all_digits(const std::string& s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Live children of this process (a zombie has nothing left to stop): from each
// thread's children list (an orphan is handed to any thread of its
// subreaper), or from a scan of /proc where the kernel has no such list.
std::vector<pid_t> live_children()
{
    std::vector<pid_t> listed;
    bool have_lists = false;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
        std::ifstream in(task.path() / "children");
        if (!in) {
            continue;
        }
        have_lists = true;
        for (long pid = 0; in >> pid;) {
            listed.push_back(static_cast<pid_t>(pid));
        }
    }
    if (!have_lists) {
        const pid_t self = ::getpid();
        for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
            const auto name = entry.path().filename().string();
            if (!all_digits(name)) {
                continue;
            }
            const auto pid = static_cast<pid_t>(std::stol(name));
            if (const auto stat = read_proc_stat(pid); stat && stat->ppid == self) {
                listed.push_back(pid);
            }
        }
    }
    std::vector<pid_t> out;
    for (pid_t pid : listed) {
        if (const auto stat = read_proc_stat(pid); stat && stat->state != 'Z') {
            out.push_back(pid);
        }
    }
    return out;
}

} // namespace

std::optional<std::string> TreeSlot::cgroup_path() const
{
    if (!m_leaf) {
        return std::nullopt;
    }
    return m_leaf->path().string();
}

void StartedTree::abandon() noexcept
{
    if (!m_tree) {
        return;
    }
    try {
        if (m_tree->contained_by_cgroup()) {
            m_tree->kill_tree();
        }
        pollfd exited{m_tree->leader().fd(), POLLIN, 0};
        ::poll(&exited, 1, static_cast<int>(m_kill_timeout.count()));
        m_tree->leader().try_reap();
    } catch (const std::exception& e) {
        log::error("cannot stop an abandoned tree", {{"process", m_tree->id()}, {"error", e.what()}});
    }
}

ProcessTrees::ProcessTrees(TreeOptions options, TreeObserver* observer)
    : m_options(std::move(options)), m_observer(observer), m_containment(Containment::probe(m_options.containment)),
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
}

ProcessTrees::~ProcessTrees()
{
    if (m_closed) {
        return; // the owner shut down itself
    }
    // The owner may be half gone: it is told nothing from here on.
    m_observer = nullptr;
    try {
        if (!m_trees.empty()) {
            log::warn("process trees destroyed with live trees; tearing them down",
                      {{"count", std::to_string(m_trees.size())}});
            // The loop that would have taken a pending stop is gone: it is the
            // first stop, and the trees get their grace. Taken, not peeked at,
            // so that only a further one kills them at once.
            if (m_options.stop_signals != nullptr) {
                m_options.stop_signals->take();
            }
            teardown();
        }
        stop_adopted_orphans();
        close();
    } catch (const std::exception& e) {
        log::error("process trees shutdown failed", {{"error", e.what()}});
        kill_all();
    }
}

void ProcessTrees::kill_all() noexcept
{
    // No process outlives us anyway: a cgroup leaf would kill its tree when
    // destroyed; a fallback tree has nothing else.
    for (auto& [id, tree] : m_trees) {
        try {
            tree->kill_tree();
        } catch (const std::exception& kill_error) {
            log::error("cannot kill a tree left by a failed shutdown", {{"process", id}, {"error", kill_error.what()}});
        }
    }
}

void ProcessTrees::close()
{
    m_closed = true;
    m_trees.clear();
    m_spare_leaves.clear();
    m_containment.remove_group(m_options.group);
    if (m_containment.uses_cgroups()) {
        ::rmdir(m_containment.scope_dir().c_str()); // only succeeds when no other supervisor uses it
    }
}

TreeSlot ProcessTrees::prepare(const LaunchRequest& request, std::string id, std::string cookie)
{
    TreeSlot slot;
    slot.m_env = child_environment(request.env, cookie);
    std::filesystem::create_directories(request.log_dir);
    if (!m_spare_leaves.empty()) {
        slot.m_leaf = std::move(m_spare_leaves.back());
        m_spare_leaves.pop_back();
    } else if (m_containment.uses_cgroups()) {
        slot.m_leaf = m_containment.create_leaf(m_options.group, id);
    }
    slot.m_id = std::move(id);
    slot.m_cookie = std::move(cookie);
    return slot;
}

std::variant<StartedTree, SpawnFailure> ProcessTrees::start(TreeSlot slot, const LaunchRequest& request,
                                                            const std::map<std::string, std::string>& unrecorded_env)
{
    const auto base = file_base(request, slot.m_id);
    const std::filesystem::path stdout_path = base + ".stdout.log";
    const std::filesystem::path stderr_path = base + ".stderr.log";
    try {
        write_rerun_script(base + ".cmd.sh", request.argv, slot.m_env, request.pwd, secret_names(slot.m_env));
    } catch (const std::exception& e) {
        log::warn("cannot write cmd.sh", {{"process", slot.m_id}, {"error", e.what()}});
    }

    SpawnSpec spec;
    spec.argv = request.argv;
    auto child_env = slot.m_env;
    for (const auto& [key, value] : request.private_env) {
        child_env[key] = value;
    }
    for (const auto& [key, value] : unrecorded_env) {
        child_env[key] = value;
    }
    for (const auto& [key, value] : child_env) {
        spec.envp.push_back(key + "=" + value);
    }
    spec.pwd = request.pwd;
    spec.stdout_path = stdout_path;
    spec.stderr_path = stderr_path;
    spec.cgroup_dir_fd = slot.m_leaf ? slot.m_leaf->dir_fd() : -1;
    spec.cgroup_procs_fd = slot.m_leaf ? slot.m_leaf->procs_fd() : -1;
    auto spawned = spawn_process(spec);
    if (auto* failure = std::get_if<SpawnFailure>(&spawned)) {
        log::warn("spawn failed", {{"process", slot.m_id}, {"name", request.name}, {"error", failure->message}});
        return *failure;
    }
    auto& child = std::get<Spawned>(spawned);
    StartedTree started;
    started.m_identity.pid = child.pidfd.pid();
    started.m_identity.boot_id = m_boot_id;
    started.m_identity.start_ticks = child.start_ticks;
    started.m_identity.pidfs_ino = child.pidfd.inode();
    started.m_identity.cookie = slot.m_cookie;
    started.m_pgid = child.pgid;
    started.m_kill_timeout = m_options.kill_timeout;
    SweepTarget sweep{slot.m_cookie, child.pgid, child.start_ticks};
    started.m_tree = std::make_unique<SupervisedTree>(slot.m_id, request.name, std::move(child.pidfd),
                                                      std::move(slot.m_leaf), sweep, request.timeout_s, stdout_path,
                                                      stderr_path);
    started.m_tree->owner_logs = request.owner_logs;
    return started;
}

void ProcessTrees::track(StartedTree started)
{
    auto tree = std::move(started.m_tree);
    if (const auto level = tree->owner_logs ? log::Level::debug : log::Level::info; log::enabled(level)) {
        log::write(level, "launched",
                   {{"process", tree->id()}, {"name", tree->name()}, {"pid", std::to_string(tree->pid())},
                    {"containment", std::string(to_string(m_containment.mode()))}});
    }
    epoll_add(m_epoll.get(), tree->leader().fd(), EPOLLIN);
    if (tree->events_fd() >= 0) {
        epoll_add(m_epoll.get(), tree->events_fd(), EPOLLPRI | EPOLLET);
    }
    const auto id = tree->id();
    m_trees.emplace(id, std::move(tree));
    arm_timer(Clock::now());
}

SupervisedTree* ProcessTrees::find(const std::string& id)
{
    const auto it = m_trees.find(id);
    return it == m_trees.end() ? nullptr : it->second.get();
}

bool ProcessTrees::is_running(const std::string& id) const
{
    return m_trees.count(id) != 0;
}

bool ProcessTrees::left_processes(const std::string& id) const
{
    const auto it = m_trees.find(id);
    return it != m_trees.end() && it->second->leader_exit() && !it->second->claimed && !it->second->empty();
}

std::vector<std::string> ProcessTrees::running() const
{
    std::vector<std::string> ids;
    for (const auto& [id, tree] : m_trees) {
        ids.push_back(id);
    }
    return ids;
}

std::vector<std::string> ProcessTrees::unreaped() const
{
    std::vector<std::string> ids;
    for (const auto& [id, tree] : m_trees) {
        if (!tree->leader_exit()) {
            ids.push_back(id);
        }
    }
    return ids;
}

void ProcessTrees::process_events()
{
    handle_events();
}

void ProcessTrees::handle_events()
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
    reap_children();
    collect_finished();
    if (m_observer != nullptr) {
        m_observer->events_handled();
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

void ProcessTrees::on_leader_exit(SupervisedTree& tree, const ProcessExit& exit)
{
    tree.set_leader_exit(exit);
    ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, tree.leader().fd(), nullptr);
    const auto elapsed = Clock::now() - tree.started();
    if (m_observer != nullptr) {
        m_observer->leader_exited(
            {tree.id(), exit, tree.end_reason, tree.stdout_path(), tree.stderr_path(), tree.claimed});
    }
    if (const auto level = tree.owner_logs ? log::Level::debug : log::Level::info; log::enabled(level)) {
        log::write(level, "process exited",
                   {{"process", tree.id()}, {"name", tree.name()}, {"exit_code", std::to_string(exit.exit_code)},
                    {"signal", exit.term_signal ? std::to_string(*exit.term_signal) : ""},
                    {"end_reason", tree.end_reason}, {"elapsed_ms", ms(elapsed)}});
    }
}

void ProcessTrees::reap_children()
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

ProcessOutcome ProcessTrees::outcome_of(const SupervisedTree& tree) const
{
    ProcessOutcome outcome;
    outcome.row_id = tree.id();
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

void ProcessTrees::bound_logs(const SupervisedTree& tree)
{
    for (const auto* path : {&tree.stdout_path(), &tree.stderr_path()}) {
        if (bound_log_file(*path, m_options.max_log_bytes) > 0 && m_bounded_logs.insert(path->string()).second) {
            log::warn("log over its limit: dropping its oldest output from now on",
                      {{"process", tree.id()}, {"path", path->string()},
                       {"max_bytes", std::to_string(m_options.max_log_bytes)}});
        }
    }
}

void ProcessTrees::finish(SupervisedTree& tree, bool tree_empty)
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
        m_done[tree.id()] = outcome;
    } else {
        m_finished.push_back(outcome);
    }
    m_trees.erase(tree.id());
    if (m_observer != nullptr) {
        m_observer->tree_finished(outcome);
    }
}

void ProcessTrees::collect_finished()
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

std::vector<ProcessOutcome> ProcessTrees::take_finished()
{
    return std::exchange(m_finished, {});
}

void ProcessTrees::rearm()
{
    arm_timer(Clock::now());
}

void ProcessTrees::arm_timer(Clock::time_point now)
{
    std::optional<Clock::time_point> next;
    if (m_observer != nullptr) {
        next = m_observer->next_due();
    }
    if (!m_trees.empty()) {
        next = std::min(next.value_or(Clock::time_point::max()), now + k_poll_tick);
    }
    itimerspec spec{}; // all zero: disarmed
    if (next) {
        const auto delay = std::max(*next - now, Clock::duration(std::chrono::microseconds(100)));
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(delay).count();
        spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
        spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    }
    if (::timerfd_settime(m_timer.get(), 0, &spec, nullptr) != 0) {
        throw_errno("timerfd_settime");
    }
}

void ProcessTrees::wait_until(Clock::time_point until)
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
            m_while_blocked();
        } catch (const std::exception& e) {
            log::warn("owner's task during a blocking wait failed", {{"error", e.what()}});
        }
    }
}

void ProcessTrees::set_while_blocked(std::function<void()> task)
{
    m_while_blocked = std::move(task);
    m_next_blocked_task = Clock::now() + k_blocked_task_interval;
}

ProcessOutcome ProcessTrees::wait(const std::string& id, std::optional<milliseconds> timeout,
                                  std::optional<milliseconds> grace)
{
    if (auto done = m_done.find(id); done != m_done.end()) {
        auto outcome = done->second;
        m_done.erase(done);
        return outcome;
    }
    SupervisedTree* tree = find(id);
    if (!tree) {
        throw std::out_of_range("not a supervised process: " + id);
    }
    tree->claimed = true;
    auto deadline = Clock::time_point::max();
    if (timeout) {
        deadline = Clock::now() + *timeout;
    } else if (auto remaining = tree->remaining(Clock::now())) {
        deadline = Clock::now() + *remaining;
    }
    // Where keep_deadlines() left the escalation, if it began it.
    auto kill_at = tree->kill_at.value_or(Clock::time_point::max());
    auto give_up = tree->killed ? Clock::now() + m_options.kill_timeout : Clock::time_point::max();
    for (;;) {
        handle_events();
        if (auto done = m_done.find(id); done != m_done.end()) {
            auto outcome = done->second;
            m_done.erase(done);
            return outcome;
        }
        tree = find(id);
        const auto now = Clock::now();
        if (tree->leader_exit()) {
            if (tree->empty()) {
                finish(*tree, true);
                continue;
            }
            if (give_up == Clock::time_point::max()) {
                // The leader is done; whatever it left behind is a leak.
                log::warn("killing leftovers of exited process", {{"process", id}, {"name", tree->name()}});
                tree->kill_tree();
                give_up = now + m_options.kill_timeout;
            } else if (now >= give_up) {
                log::error("tree survived SIGKILL", {{"process", id}});
                finish(*tree, false);
                continue;
            }
        } else if (now >= deadline && kill_at == Clock::time_point::max()) {
            log::info("timeout: SIGTERM",
                      {{"process", id}, {"name", tree->name()}, {"elapsed_ms", ms(now - tree->started())}});
            kill_at = now + grace.value_or(m_options.teardown_grace);
            stop_for_timeout(*tree, kill_at);
        } else if (now >= kill_at && give_up == Clock::time_point::max()) {
            log::info("timeout grace over: SIGKILL tree", {{"process", id}, {"name", tree->name()}});
            tree->kill_tree();
            give_up = now + m_options.kill_timeout;
        } else if (now >= give_up) {
            // The leader itself survived SIGKILL (stuck in D state): never
            // reaped, so no exit was reported; without this its row would
            // stay running. As teardown() does in the same case.
            log::error("tree survived SIGKILL", {{"process", id}});
            if (m_observer != nullptr) {
                m_observer->end_decided(id, tree->end_reason);
            }
            finish(*tree, false);
            continue;
        }
        // The next step's time: a step once taken is not waited for again
        // (the deadline stays in the past through the grace).
        wait_until(give_up != Clock::time_point::max()   ? give_up
                   : kill_at != Clock::time_point::max() ? kill_at
                                                         : deadline);
    }
}

std::optional<Clock::time_point> ProcessTrees::keep_deadlines()
{
    const auto now = Clock::now();
    std::optional<Clock::time_point> next;
    const auto sooner = [&next](Clock::time_point t) { next = next ? std::min(*next, t) : t; };
    for (auto& [id, tree] : m_trees) {
        // A claimed tree keeps its own deadlines (wait() and teardown() never
        // block on the database); a killed one only waits to be reaped.
        if (tree->claimed || tree->killed) {
            continue;
        }
        if (!tree->kill_at) {
            const auto remaining = tree->remaining(now);
            // No timeout, or a leader that ended on its own: its outcome is its own.
            if (!remaining || tree->leader().has_exited()) {
                continue;
            }
            if (*remaining > Clock::duration::zero()) {
                sooner(now + *remaining);
                continue;
            }
            log::warn("timeout while the database is unreachable: SIGTERM",
                      {{"process", id}, {"name", tree->name()}, {"elapsed_ms", ms(now - tree->started())}});
            stop_for_timeout(*tree, now + m_options.teardown_grace);
        }
        if (now >= *tree->kill_at) {
            if (tree->leader().has_exited() && !tree->has_members()) {
                continue; // the SIGTERM ended it all: nothing to kill
            }
            log::warn("timeout grace over while the database is unreachable: SIGKILL tree",
                      {{"process", id}, {"name", tree->name()}});
            tree->kill_tree();
            continue;
        }
        sooner(*tree->kill_at);
    }
    return next;
}

bool ProcessTrees::fast_stop_requested() const
{
    if (m_options.stop_signals == nullptr) {
        return false;
    }
    // Only looked at: the owner's loop still counts it.
    pollfd pfd{m_options.stop_signals->fd(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN) != 0;
}

std::vector<ProcessOutcome> ProcessTrees::teardown(const std::vector<std::string>& ids,
                                                   std::optional<milliseconds> grace, TermTarget term_target)
{
    const auto t0 = Clock::now();
    const auto cap = grace.value_or(m_options.teardown_grace);
    std::vector<TeardownEntry> entries;
    const auto wanted = ids.empty() ? running() : ids;
    std::vector<ProcessOutcome> outcomes;
    for (const auto& id : wanted) {
        if (auto done = m_done.find(id); done != m_done.end()) {
            outcomes.push_back(done->second);
            m_done.erase(done);
            continue;
        }
        SupervisedTree* tree = find(id);
        if (!tree) {
            continue;
        }
        tree->claimed = true;
        const auto remaining = tree->remaining(t0).value_or(Clock::duration::max());
        const auto budget = std::min<Clock::duration>(remaining, cap);
        // A tree keep_deadlines() has killed already gets kill_timeout from now to empty.
        entries.push_back({id, t0 + budget, tree->killed ? t0 + m_options.kill_timeout : Clock::time_point::max()});
    }
    // Leaders that exited since the last events are reaped first, so phase 1
    // sees them gone and signals their trees instead.
    handle_events();
    // Phase 1: every tree at once, so the total is the largest deadline, not the sum.
    for (auto& entry : entries) {
        SupervisedTree* tree = find(entry.id);
        if (!tree) {
            continue; // ended just now; phase 2 collects it from m_done
        }
        log::info("teardown phase 1: SIGTERM", {{"process", entry.id}, {"name", tree->name()},
                                                {"pid", std::to_string(tree->pid())},
                                                {"deadline_ms", ms(entry.deadline - t0)}});
        entry.tree_termed = send_term(*tree, term_target);
    }
    // Phase 2: wait for each tree (every member, not just the leader) until
    // its own deadline; phase 3: SIGKILL what is still populated then.
    bool fast = false;
    for (;;) {
        handle_events();
        const auto now = Clock::now();
        if (!fast && fast_stop_requested()) {
            // A second stop request: nobody wants to wait for the graceful path any more.
            log::warn("teardown: stop requested again, killing every tree now", {{"trees", std::to_string(entries.size())}});
            for (auto& entry : entries) {
                entry.deadline = std::min(entry.deadline, now);
            }
            fast = true;
        }
        auto next = Clock::time_point::max();
        bool pending = false;
        for (auto& entry : entries) {
            if (entry.done) {
                continue;
            }
            SupervisedTree* tree = find(entry.id);
            if (!tree) {
                entry.done = true; // finished elsewhere (m_done holds it)
                continue;
            }
            if (tree->leader_exit() && tree->empty()) {
                log::info("teardown: tree gone", {{"process", entry.id}, {"name", tree->name()},
                                                  {"killed", tree->killed ? "true" : "false"},
                                                  {"elapsed_ms", ms(now - t0)}});
                if (tree->killed && m_observer != nullptr) {
                    m_observer->end_decided(entry.id, "killed_on_teardown");
                }
                finish(*tree, true);
                entry.done = true;
                continue;
            }
            if (!tree->killed && !entry.tree_termed && tree->leader_exit() && now < entry.deadline) {
                // The leader got the SIGTERM and is gone (a shell dies of it
                // without passing it on): the rest of the tree gets its own
                // chance to stop before its deadline, not just the SIGKILL.
                log::info("teardown: leader gone, SIGTERM to the rest of the tree",
                          {{"process", entry.id}, {"name", tree->name()}, {"elapsed_ms", ms(now - t0)}});
                tree->signal_tree(SIGTERM);
                tree->signal_tree(SIGCONT);
                entry.tree_termed = true;
            }
            if (!tree->killed && now >= entry.deadline) {
                log::info("teardown phase 3: SIGKILL tree", {{"process", entry.id}, {"name", tree->name()},
                                                             {"elapsed_ms", ms(now - t0)}});
                tree->end_reason = "killed_on_teardown";
                tree->kill_tree();
                entry.give_up = now + m_options.kill_timeout;
            } else if (tree->killed && now >= entry.give_up) {
                log::error("teardown: tree survived SIGKILL", {{"process", entry.id}, {"name", tree->name()}});
                if (m_observer != nullptr) {
                    m_observer->end_decided(entry.id, "killed_on_teardown");
                }
                finish(*tree, false);
                entry.done = true;
                continue;
            }
            pending = true;
            next = std::min(next, tree->killed ? entry.give_up : entry.deadline);
        }
        if (!pending) {
            break;
        }
        wait_until(next);
    }
    for (const auto& entry : entries) {
        if (auto done = m_done.find(entry.id); done != m_done.end()) {
            outcomes.push_back(done->second);
            m_done.erase(done);
        }
    }
    log::info("teardown complete", {{"trees", std::to_string(entries.size())}, {"elapsed_ms", ms(Clock::now() - t0)}});
    return outcomes;
}

void ProcessTrees::stop_adopted_orphans()
{
    if (!m_containment.uses_cgroups()) {
        return;
    }
    const auto adopted = [this] {
        std::vector<pid_t> out;
        for (pid_t pid : live_children()) {
            const bool leader = std::any_of(m_trees.begin(), m_trees.end(), [pid](const auto& entry) {
                return !entry.second->leader_exit() && entry.second->pid() == pid;
            });
            if (!leader && m_containment.holds(pid)) {
                out.push_back(pid);
            }
        }
        return out;
    };
    reap_children();
    auto orphans = adopted();
    if (orphans.empty()) {
        return;
    }
    log::warn("stopping processes adopted from dead supervisors", {{"count", std::to_string(orphans.size())}});
    const auto t0 = Clock::now();
    const auto kill_at = t0 + m_options.teardown_grace;
    const auto give_up = kill_at + m_options.kill_timeout;
    std::set<pid_t> termed;
    for (;;) {
        const auto now = Clock::now();
        // Not reaped since adopted() listed them: the pids are still theirs.
        for (pid_t pid : orphans) {
            if (now >= kill_at) {
                ::kill(pid, SIGKILL);
            } else if (termed.insert(pid).second) {
                ::kill(pid, SIGTERM);
                ::kill(pid, SIGCONT);
            }
        }
        if (now >= give_up) {
            log::error("adopted processes survived SIGKILL", {{"count", std::to_string(orphans.size())}});
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        reap_children();
        orphans = adopted();
        if (orphans.empty()) {
            log::info("adopted processes gone",
                      {{"count", std::to_string(termed.size())},
                       {"elapsed_ms", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                         Clock::now() - t0).count())}});
            return;
        }
    }
}

} // namespace orch
