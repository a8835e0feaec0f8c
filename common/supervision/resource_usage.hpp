#pragma once

#include <sys/resource.h>

namespace orch {

// The CPU time of a reaped process as waitid() reports it: the process itself
// plus every descendant it waited for (its reaped children count, like
// time(1); orphans adopted by a subreaper count for the subreaper instead).
// No peak RSS: a child started with vfork semantics (ours, posix_spawn) reports
// its launcher's resident set at exec as its own peak, which would make every
// hook look as big as its worker.
struct ResourceUsage {
    double user_s = 0;
    double system_s = 0;

    static ResourceUsage from_rusage(const struct rusage& ru) noexcept
    {
        auto seconds = [](const timeval& tv) {
            return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
        };
        return {seconds(ru.ru_utime), seconds(ru.ru_stime)};
    }

    // This process and the children it has reaped so far (getrusage): what
    // its parent's waitid() will report, for a process writing its own exit.
    static ResourceUsage of_self_and_reaped() noexcept
    {
        struct rusage self{}, children{};
        ::getrusage(RUSAGE_SELF, &self);
        ::getrusage(RUSAGE_CHILDREN, &children);
        auto a = from_rusage(self);
        const auto b = from_rusage(children);
        a.user_s += b.user_s;
        a.system_s += b.system_s;
        return a;
    }
};

} // namespace orch
