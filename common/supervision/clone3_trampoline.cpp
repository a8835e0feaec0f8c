#include "common/supervision/clone3_trampoline.hpp"

#include <cerrno>

#include <sys/syscall.h>

namespace orch {

#if defined(__x86_64__)

// The same shape as glibc's internal clone3 wrapper: the system call returns
// twice; the child, on its own stack, must not return through this frame, so
// it calls fn and exits in assembly. Registers other than rax, rcx and r11 are
// preserved by `syscall`, so fn (rdx) survives; arg (rcx) is moved to r9 first.
extern "C" long orch_clone3_trampoline(clone_args* args, std::size_t size, int (*fn)(void*), void* arg);

asm(R"(
    .text
    .globl orch_clone3_trampoline
    .type orch_clone3_trampoline, @function
orch_clone3_trampoline:
    .cfi_startproc
    movq %rcx, %r9
    movl $)" "435" R"(, %eax
    syscall
    testq %rax, %rax
    jz 1f
    ret
1:
    .cfi_undefined rip
    xorl %ebp, %ebp
    andq $-16, %rsp
    movq %r9, %rdi
    call *%rdx
    movl %eax, %edi
    movl $60, %eax
    syscall
    hlt
    .cfi_endproc
    .size orch_clone3_trampoline, .-orch_clone3_trampoline
)");

static_assert(SYS_clone3 == 435, "the trampoline hard-codes clone3's x86-64 number");
static_assert(SYS_exit == 60, "the trampoline hard-codes exit's x86-64 number");

long clone3_run(clone_args* args, std::size_t size, int (*fn)(void*), void* arg) noexcept
{
    return orch_clone3_trampoline(args, size, fn, arg);
}

#else

long clone3_run(clone_args*, std::size_t, int (*)(void*), void*) noexcept
{
    return -ENOSYS;
}

#endif

} // namespace orch
