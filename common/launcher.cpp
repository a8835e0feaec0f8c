#include "common/launcher.hpp"

#include "common/errors.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <system_error>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace orch {
namespace {

// Stack of the vfork-style child: it only runs ChildSetup::run, a few
// syscalls deep, until execve.
constexpr std::size_t k_child_stack_bytes = 64 * 1024;

// Everything the child needs, prepared by the parent: between clone and exec
// only async-signal-safe calls are allowed (no allocation, no locks, no
// logging), and the child shares the parent's memory.
struct ChildSetup {
    const char* executable = nullptr;
    const char* const* argv = nullptr;
    const char* const* envp = nullptr;
    const char* pwd = nullptr;
    int stdin_fd = -1;
    int stdout_fd = -1;
    int stderr_fd = -1;
    int cgroup_procs_fd = -1;
    // Written by a child that fails before or at exec; read by the parent
    // once clone returns (CLONE_VFORK: after the exec or the _exit).
    int error = 0;

    static int run(void* self) { static_cast<ChildSetup*>(self)->exec(); }

    [[noreturn]] void exec()
    {
        // Handlers are the parent's code: none may run in the child, so every
        // disposition is reset before signals are unblocked (the table is a
        // copy: no CLONE_SIGHAND). Fails harmlessly for KILL/STOP and the
        // signals glibc reserves.
        struct sigaction dfl{};
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; ++sig) {
            ::sigaction(sig, &dfl, nullptr);
        }
        // Join the cgroup first, so that nothing this process ever forks can
        // be outside it.
        if (cgroup_procs_fd >= 0 && !join_cgroup()) {
            fail();
        }
        // Own process group: terminal signals and kill(-pgid) from others
        // don't reach us, and the fallback can find the tree by pgid.
        if (::setpgid(0, 0) != 0) {
            fail();
        }
        if (::dup2(stdin_fd, STDIN_FILENO) < 0 || ::dup2(stdout_fd, STDOUT_FILENO) < 0 ||
            ::dup2(stderr_fd, STDERR_FILENO) < 0) {
            fail();
        }
        if (pwd && ::chdir(pwd) != 0) {
            fail();
        }
        // No inherited descriptors, CLOEXEC or not: the fd table is the
        // child's own copy (no CLONE_FILES).
        if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
            fail();
        }
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::execve(executable, const_cast<char* const*>(argv), const_cast<char* const*>(envp));
        fail();
    }

    [[noreturn]] void fail()
    {
        error = errno != 0 ? errno : EINVAL;
        ::_exit(127);
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
};

// The child's stack, unmapped when the spawn is over.
class ChildStack {
public:
    ChildStack()
        : m_base(::mmap(nullptr, k_child_stack_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0))
    {
        if (m_base == MAP_FAILED) {
            throw std::system_error(errno, std::generic_category(), "mmap(child stack)");
        }
    }
    ~ChildStack() { ::munmap(m_base, k_child_stack_bytes); }
    ChildStack(const ChildStack&) = delete;
    ChildStack& operator=(const ChildStack&) = delete;
    void* top() const noexcept { return static_cast<char*>(m_base) + k_child_stack_bytes; }

private:
    void* m_base;
};

// Every signal blocked in this thread while it lives, the previous mask
// restored after: no handler of ours may run in a child sharing our memory.
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
    Fd null_in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
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
    std::vector<const char*> argv;
    for (const auto& arg : spec.argv) {
        argv.push_back(arg.c_str());
    }
    argv.push_back(nullptr);
    ChildSetup setup;
    setup.executable = executable.c_str();
    setup.argv = argv.data();
    setup.envp = envp.data();
    setup.pwd = spec.pwd.empty() ? nullptr : spec.pwd.c_str();
    setup.stdin_fd = null_in.get();
    setup.stdout_fd = out.get();
    setup.stderr_fd = err.get();
    setup.cgroup_procs_fd = spec.cgroup_procs_fd;

    // vfork-style (CLONE_VM | CLONE_VFORK, like posix_spawn): no copy of our
    // page tables and no copy-on-write faults afterwards, which a fork of a
    // process holding a database connection and a heap pays on every hook.
    // We resume once the child has exec'd or failed.
    pid_t pid = -1;
    {
        ChildStack stack;
        SignalsBlocked blocked;
        pid = ::clone(&ChildSetup::run, stack.top(), CLONE_VM | CLONE_VFORK | SIGCHLD, &setup);
        if (pid < 0) {
            throw std::system_error(errno, std::generic_category(), "clone");
        }
    }
    if (setup.error != 0) {
        // The failed child has exited; nobody else will reap it.
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        return SpawnFailure{setup.error, executable + ": " + std::strerror(setup.error)};
    }
    // The child is unreaped, so its pid cannot be reused before this open.
    auto pidfd = Pidfd::open(pid);
    if (!pidfd) {
        throw std::system_error(ESRCH, std::generic_category(), "pidfd_open of fresh child");
    }
    return Spawned{std::move(*pidfd), pid};
}

} // namespace orch
