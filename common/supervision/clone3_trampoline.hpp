#pragma once

#include <cstddef>

#include <linux/sched.h>

namespace orch {

// Whether this build can run a function in a clone3 child that shares our
// memory (x86-64: the trampoline is written for its syscall convention).
#if defined(__x86_64__)
inline constexpr bool k_have_clone3_trampoline = true;
#else
inline constexpr bool k_have_clone3_trampoline = false;
#endif

// clone3(args) where the child runs fn(arg) on the stack given in args and exits
// with its result (fn normally execs or _exits first). Meant for CLONE_VM |
// CLONE_VFORK: the caller is suspended until the child execs or exits, and
// everything fn writes to memory is visible to the caller afterwards. fn runs
// with the caller's memory and must only make async-signal-safe calls: no
// allocation, no locks, no return into the caller's frames (hence the
// trampoline: C++ cannot run a child that shares memory on another stack).
// Returns the child's pid, or -errno (the raw system call's convention).
// Not available where k_have_clone3_trampoline is false (returns -ENOSYS).
long clone3_run(clone_args* args, std::size_t size, int (*fn)(void*), void* arg) noexcept;

} // namespace orch
