#include "common/supervision/launcher.hpp"

#include "common/base/boost_process.hpp"
#include "common/supervision/clone_into_cgroup_launcher.hpp"
#include "common/base/errors.hpp"
#include "common/base/log.hpp"
#include "common/supervision/process_identity.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <atomic>
#include <optional>
#include <system_error>

#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

namespace orch {
namespace {

// Runs in the child (before exec) and in the parent around the vfork. The child
// shares our memory until it execs: only async-signal-safe calls, no
// allocation, no locks, no logging, and no handler of ours may run in it.
struct ChildSetup {
    const char* const* envp = nullptr;
    const char* pwd = nullptr;
    int stdin_fd = -1;
    int stdout_fd = -1;
    int stderr_fd = -1;
    int cgroup_procs_fd = -1;

    template <typename Launcher>
    bp::error_code on_setup(Launcher& launcher, const bp::filesystem::path&, const char* const*&)
    {
        launcher.env = envp;
        return {};
    }

    template <typename Launcher>
    bp::error_code on_exec_setup(Launcher&, const bp::filesystem::path&, const char* const*&)
    {
        // Join the cgroup first, so that nothing this process ever forks can
        // be outside it.
        if (cgroup_procs_fd >= 0 && !join_cgroup()) {
            return fail();
        }
        // Own process group: terminal signals and kill(-pgid) from others
        // don't reach us, and the fallback can find the tree by pgid.
        if (::setpgid(0, 0) != 0) {
            return fail();
        }
        // Dispositions first (the table is the child's own copy), then the mask
        // the parent blocked for the vfork: from here a signal acts on the child.
        struct sigaction dfl{};
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; ++sig) {
            ::sigaction(sig, &dfl, nullptr); // fails harmlessly for KILL/STOP and reserved signals
        }
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (::dup2(stdin_fd, STDIN_FILENO) < 0 || ::dup2(stdout_fd, STDOUT_FILENO) < 0 ||
            ::dup2(stderr_fd, STDERR_FILENO) < 0) {
            return fail();
        }
        if (pwd && ::chdir(pwd) != 0) {
            return fail();
        }
        return {};
    }

    // Boost 1.81 detects these hooks with a 5-argument signature but calls
    // them with 4, so a variadic template is needed to be called at all.
    template <typename Launcher, typename... Rest>
    void on_exec_error(Launcher&, Rest&&...)
    {
        // Boost would exit() here, running the parent's atexit handlers and
        // flushing its stdio buffers in the child.
        ::_exit(127);
    }

    template <typename Launcher, typename... Rest>
    void on_error(Launcher& launcher, Rest&&...)
    {
        // The failed child has exited; nobody else will reap it.
        if (launcher.pid > 0) {
            while (::waitpid(launcher.pid, nullptr, 0) < 0 && errno == EINTR) {
            }
        }
    }

    bool join_cgroup() const
    {
        char buf[24];
        int len = 0;
        char digits[24];
        int n = 0;
        for (long pid = ::getpid(); pid > 0; pid /= 10) {
            digits[n++] = static_cast<char>('0' + pid % 10);
        }
        while (n > 0) {
            buf[len++] = digits[--n];
        }
        return ::write(cgroup_procs_fd, buf, static_cast<size_t>(len)) == len;
    }

    static bp::error_code fail() { return bp::error_code(errno, boost::system::system_category()); }
};

// Every signal blocked in this thread while it lives, the previous mask
// restored after: a handler of ours must not run in a child sharing our memory.
class SignalsBlocked {
public:
    SignalsBlocked()
    {
        sigset_t all;
        sigfillset(&all);
        if (const int rc = ::pthread_sigmask(SIG_SETMASK, &all, &m_previous); rc != 0) {
            throw std::system_error(rc, std::generic_category(), "pthread_sigmask");
        }
    }
    ~SignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &m_previous, nullptr); }
    SignalsBlocked(const SignalsBlocked&) = delete;
    SignalsBlocked& operator=(const SignalsBlocked&) = delete;

private:
    sigset_t m_previous{};
};

Fd open_log(const std::filesystem::path& path)
{
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    return fd;
}

std::string find_in_path(const std::string& name, const std::vector<std::string>& envp)
{
    if (name.find('/') != std::string::npos) {
        return name;
    }
    std::string path_value = "/usr/local/bin:/usr/bin:/bin";
    for (const auto& entry : envp) {
        if (entry.rfind("PATH=", 0) == 0) {
            path_value = entry.substr(5);
        }
    }
    std::size_t begin = 0;
    while (begin <= path_value.size()) {
        auto end = path_value.find(':', begin);
        if (end == std::string::npos) {
            end = path_value.size();
        }
        const std::string dir = end > begin ? path_value.substr(begin, end - begin) : ".";
        const std::string candidate = dir + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
        begin = end + 1;
    }
    return {};
}

// Set once clone3 turned out to be missing or too old: every later launch goes
// straight to the vfork path.
std::atomic<bool> g_clone3_unusable{false};

} // namespace

std::variant<Spawned, SpawnFailure> spawn_process(const SpawnSpec& spec)
{
    if (spec.argv.empty()) {
        return SpawnFailure{EINVAL, "empty argv"};
    }
    const std::string executable = find_in_path(spec.argv[0], spec.envp);
    if (executable.empty()) {
        return SpawnFailure{ENOENT, spec.argv[0] + ": not found in PATH"};
    }
    // Every child's stdin, opened once per process (again per spawn only if
    // that first open failed).
    static const Fd shared_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    Fd own_null;
    if (!shared_null) {
        own_null = Fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    }
    const Fd& null_in = shared_null ? shared_null : own_null;
    Fd out = open_log(spec.stdout_path);
    Fd err = open_log(spec.stderr_path);
    if (!null_in || !out || !err) {
        return SpawnFailure{errno, std::string("cannot open log files: ") + std::strerror(errno)};
    }
    std::vector<const char*> envp;
    for (const auto& entry : spec.envp) {
        envp.push_back(entry.c_str());
    }
    envp.push_back(nullptr);
    ChildSetup setup;
    setup.envp = envp.data();
    setup.pwd = spec.pwd.empty() ? nullptr : spec.pwd.c_str();
    setup.stdin_fd = null_in.get();
    setup.stdout_fd = out.get();
    setup.stderr_fd = err.get();

    // The clone3 launcher that shares our memory never notifies the io_context
    // of its fork, so one io_context per thread serves every such launch (a new
    // one costs an eventfd, an epoll and a timerfd at each spawn). The other
    // launchers notify it, and get a fresh one each time.
    thread_local boost::asio::io_context shared_io;
    std::optional<boost::asio::io_context> fresh_io;
    auto io_for = [&](bool notifies_fork) -> boost::asio::io_context& {
        if (!notifies_fork) {
            return shared_io;
        }
        return fresh_io ? *fresh_io : fresh_io.emplace();
    };
    bp::error_code ec;
    const std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());
    std::optional<bp::process> process;
    CgroupEntry cgroup_entry = CgroupEntry::none;
    // The child's start time, bracketed by two clock readings (the launch
    // returns once it has exec'd, well within a 10 ms tick mostly).
    const auto before = boottime_ns();
    auto start_ticks = [before](pid_t pid) {
        if (auto ticks = start_ticks_between(before, boottime_ns())) {
            return *ticks;
        }
        // Our unreaped child's pid is pinned, so its stat is valid even if it
        // has already exited.
        return read_proc_stat(pid).value_or(ProcStat{}).start_ticks;
    };
    if (spec.cgroup_dir_fd >= 0 && !g_clone3_unusable.load(std::memory_order_relaxed)) {
        CloneIntoCgroupLauncher launcher(spec.cgroup_dir_fd);
        {
            SignalsBlocked blocked;
            process.emplace(launcher(io_for(!k_have_clone3_trampoline).get_executor(), ec, executable, args, setup));
        }
        if (launcher.clone_failed && (ec.value() == ENOSYS || ec.value() == EINVAL || ec.value() == E2BIG)) {
            log::info("clone3 into a cgroup is not available; children join their cgroup before exec",
                      {{"errno", std::to_string(ec.value())}});
            g_clone3_unusable.store(true, std::memory_order_relaxed);
            process.reset();
            ec.clear();
        } else if (!ec) {
            // The child and its pidfd came from clone3 itself (the process
            // object is empty: see CloneIntoCgroupLauncher::child_pidfd); a
            // failure goes on to the SpawnFailure below.
            if (!launcher.child_pidfd) {
                throw std::system_error(EINVAL, std::generic_category(), "clone3 returned no pidfd");
            }
            const auto ticks = start_ticks(launcher.pid);
            return Spawned{Pidfd::adopt(std::move(launcher.child_pidfd), launcher.pid), launcher.pid,
                           CgroupEntry::at_birth, ticks};
        }
    }
    if (!process) {
        // vfork (Boost's vfork_launcher, as posix_spawn does): a fork would copy the
        // page tables of a process holding a heap and a database connection and pay
        // copy-on-write faults afterwards, on every hook. Boost closes the inherited
        // descriptors with close_range in the child (kernel headers >= 5.11).
        setup.cgroup_procs_fd = spec.cgroup_procs_fd;
        cgroup_entry = spec.cgroup_procs_fd >= 0 ? CgroupEntry::joined_before_exec : CgroupEntry::none;
        SignalsBlocked blocked;
        process.emplace(bp::posix::vfork_launcher()(io_for(true).get_executor(), ec, executable, args, setup));
    }
    if (ec) {
        return SpawnFailure{ec.value(), executable + ": " + ec.message()};
    }
    const pid_t pid = process->id();
    const auto ticks = start_ticks(pid);
    // The child is unreaped, so its pid cannot be reused before this open.
    auto pidfd = Pidfd::open(pid);
    // Boost's destructor would SIGKILL the child: from here on the pidfd owns it.
    process->detach();
    if (!pidfd) {
        throw std::system_error(ESRCH, std::generic_category(), "pidfd_open of fresh child");
    }
    return Spawned{std::move(*pidfd), pid, cgroup_entry, ticks};
}

} // namespace orch
