#pragma once

#include "common/base/boost_process.hpp"
#include "common/supervision/clone3_trampoline.hpp"
#include "common/base/fd.hpp"

#include <cerrno>
#include <csignal>
#include <type_traits>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <linux/sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace orch {

// A Boost.Process v2 launcher: the interface, initializer hooks, argv building
// and descriptor closing of bp::posix::default_launcher, with the fork replaced
// by clone3(CLONE_VFORK | CLONE_INTO_CGROUP). The child is born inside the
// cgroup2 directory `cgroup_dir_fd`, so nothing it forks can ever be outside,
// and nobody migrates it there. Why it matters: a write to cgroup.procs (what a
// vforked child does to join) takes the kernel's cgroup_threadgroup_rwsem for
// writing, which waits for an RCU grace period, 10-20 ms on an idle machine,
// all of it inside the launch. A birth into the cgroup takes only the read side.
//
// Where the trampoline exists (x86-64, common/supervision/clone3_trampoline.hpp) the child
// also shares our memory (CLONE_VM, as vfork and posix_spawn do) and runs on a
// stack of its own: no page tables are copied and torn down again at exec, which
// was the launcher's largest cost (about 0.4 ms per hook), and an exec error is
// simply written where the suspended parent reads it. Elsewhere the child has a
// copy-on-write copy of our memory and errors come back through a close-on-exec
// pipe, as in default_launcher. Either way CLONE_VFORK suspends the caller until
// the child has exec'd or exited, and initializers' child hooks must be
// async-signal-safe (no allocation, no locks), exactly as under vfork_launcher.
// If the clone3 call itself fails (kernel older than 5.7, or no clone3),
// `clone_failed` is set and nothing was started: the caller may fall back to
// another launcher. Not reentrant per thread (one child stack per thread).
struct CloneIntoCgroupLauncher : bp::posix::default_launcher {
    explicit CloneIntoCgroupLauncher(int cgroup_dir_fd) : m_cgroup_dir_fd(cgroup_dir_fd) {}

    bool clone_failed = false;
    // After a successful launch: the child's pid (`pid`, from default_launcher)
    // and its pidfd, which clone3 returned with it (CLONE_PIDFD). The process
    // the launch returns is empty: Boost would open a pidfd of its own and
    // register it with its reactor, only for the caller to drop it.
    Fd child_pidfd;

    template <typename Executor, typename Args, typename... Inits>
    auto operator()(Executor exec, bp::error_code& ec, const bp::filesystem::path& executable, Args&& args,
                    Inits&&... inits) -> bp::basic_process<Executor>
    {
        if constexpr (k_have_clone3_trampoline) {
            return launch_sharing_memory(exec, ec, executable, std::forward<Args>(args), inits...);
        } else {
            return launch_copying_memory(exec, ec, executable, std::forward<Args>(args), inits...);
        }
    }

private:
    static constexpr std::size_t k_child_stack_size = 256 * 1024;

    // The child's stack while it shares our memory: one per thread, made once;
    // nullptr if it cannot be mapped.
    static void* child_stack()
    {
        thread_local void* base = [] {
            void* p = ::mmap(nullptr, k_child_stack_size, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
            return p == MAP_FAILED ? nullptr : p;
        }();
        return base;
    }

    // In the child, either way: the initializers' setup, closing inherited
    // descriptors, exec. Returns only when one of them failed, with its error.
    // `ctx` is notified of the fork only in a child with a memory of its own.
    template <typename Context, typename Argv, typename... Inits>
    bp::error_code exec_in_child(Context* ctx, const bp::filesystem::path& executable, Argv& argv, Inits&... inits)
    {
        if (ctx != nullptr) {
            ctx->notify_fork(boost::asio::execution_context::fork_child);
        }
        bp::error_code ec = bp::posix::detail::on_exec_setup(*this, executable, argv, inits...);
        if (!ec) {
            close_all_fds(ec);
        }
        if (!ec) {
            ::execve(executable.c_str(), const_cast<char* const*>(argv), const_cast<char* const*>(env));
            ec.assign(errno, bp::system_category());
        }
        return ec;
    }

    template <typename Executor, typename Args, typename... Inits>
    auto launch_sharing_memory(Executor exec, bp::error_code& ec, const bp::filesystem::path& executable,
                               Args&& args, Inits&... inits) -> bp::basic_process<Executor>
    {
        namespace detail = bp::posix::detail;
        auto argv = this->build_argv_(executable, std::forward<Args>(args));
        void* stack = child_stack();
        if (stack == nullptr) {
            ec.assign(ENOMEM, bp::system_category());
            return bp::basic_process<Executor>{exec};
        }
        ec = detail::on_setup(*this, executable, argv, inits...);
        if (ec) {
            detail::on_error(*this, executable, argv, ec, inits...);
            return bp::basic_process<Executor>{exec};
        }
        // No notify_fork here: the child shares our memory and execs at once,
        // and a fork_child notification would rebuild the io_context's reactor
        // (its epoll and eventfd) in memory the parent goes on using. So the
        // caller may keep one io_context for every launch.
        using Context = std::remove_reference_t<decltype(boost::asio::query(exec, boost::asio::execution::context))>;
        // Written by the child, read once it has exec'd (0) or exited (its errno).
        volatile int child_error = 0;
        auto child = [&]() {
            bp::error_code cec = exec_in_child(static_cast<Context*>(nullptr), executable, argv, inits...);
            child_error = cec.value() != 0 ? cec.value() : EINVAL;
            detail::on_exec_error(*this, executable, argv, cec, inits...);
            ::_exit(127);
        };
        using Child = decltype(child);
        int pidfd = -1;
        clone_args args3{};
        args3.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP | CLONE_PIDFD;
        args3.pidfd = reinterpret_cast<__u64>(&pidfd);
        args3.exit_signal = SIGCHLD;
        args3.cgroup = static_cast<__u64>(m_cgroup_dir_fd);
        args3.stack = reinterpret_cast<__u64>(stack);
        args3.stack_size = k_child_stack_size;
        const long rc = clone3_run(&args3, sizeof args3, [](void* body) -> int {
            (*static_cast<Child*>(body))();
            return 127;
        }, &child);
        if (rc < 0) {
            clone_failed = true;
            ec.assign(static_cast<int>(-rc), bp::system_category());
            detail::on_fork_error(*this, executable, argv, ec, inits...);
            detail::on_error(*this, executable, argv, ec, inits...);
            return bp::basic_process<Executor>{exec};
        }
        pid = static_cast<pid_t>(rc);
        child_pidfd.reset(pidfd);
        if (child_error != 0) {
            ec.assign(child_error, bp::system_category());
            detail::on_error(*this, executable, argv, ec, inits...);
            return bp::basic_process<Executor>{exec};
        }
        detail::on_success(*this, executable, argv, ec, inits...);
        return bp::basic_process<Executor>{exec};
    }

    template <typename Executor, typename Args, typename... Inits>
    auto launch_copying_memory(Executor exec, bp::error_code& ec, const bp::filesystem::path& executable,
                               Args&& args, Inits&... inits) -> bp::basic_process<Executor>
    {
        namespace detail = bp::posix::detail;
        using boost::asio::execution_context;
        auto argv = this->build_argv_(executable, std::forward<Args>(args));
        int ends[2];
        if (::pipe2(ends, O_CLOEXEC) != 0) {
            ec.assign(errno, bp::system_category());
            return bp::basic_process<Executor>{exec};
        }
        Fd read_end(ends[0]);
        Fd write_end(ends[1]);
        ec = detail::on_setup(*this, executable, argv, inits...);
        if (ec) {
            detail::on_error(*this, executable, argv, ec, inits...);
            return bp::basic_process<Executor>{exec};
        }
        fd_whitelist.push_back(write_end.get());

        auto& ctx = boost::asio::query(exec, boost::asio::execution::context);
        ctx.notify_fork(execution_context::fork_prepare);
        int pidfd = -1;
        clone_args args3{};
        args3.flags = CLONE_VFORK | CLONE_INTO_CGROUP | CLONE_PIDFD;
        args3.pidfd = reinterpret_cast<__u64>(&pidfd);
        args3.exit_signal = SIGCHLD;
        args3.cgroup = static_cast<__u64>(m_cgroup_dir_fd);
        pid = static_cast<pid_t>(::syscall(SYS_clone3, &args3, sizeof args3));
        if (pid < 0) {
            const int err = errno;
            ctx.notify_fork(execution_context::fork_parent);
            clone_failed = true;
            ec.assign(err, bp::system_category());
            detail::on_fork_error(*this, executable, argv, ec, inits...);
            detail::on_error(*this, executable, argv, ec, inits...);
            return bp::basic_process<Executor>{exec};
        }
        if (pid == 0) {
            ec = exec_in_child(&ctx, executable, argv, inits...);
            const int err = ec.value();
            [[maybe_unused]] auto written = ::write(write_end.get(), &err, sizeof err);
            detail::on_exec_error(*this, executable, argv, ec, inits...);
            ::_exit(127);
        }
        ctx.notify_fork(execution_context::fork_parent);
        child_pidfd.reset(pidfd);
        write_end.reset();
        int child_error = 0;
        ssize_t count = -1;
        while ((count = ::read(read_end.get(), &child_error, sizeof child_error)) < 0 && errno == EINTR) {
        }
        if (count < 0) {
            ec.assign(errno, bp::system_category());
        } else if (count > 0) {
            ec.assign(child_error, bp::system_category());
        }
        if (ec) {
            detail::on_error(*this, executable, argv, ec, inits...);
            return bp::basic_process<Executor>{exec};
        }
        detail::on_success(*this, executable, argv, ec, inits...);
        return bp::basic_process<Executor>{exec};
    }

    int m_cgroup_dir_fd;
};

} // namespace orch
