// Stand-in hook: double-forks a setsid grandchild that ignores SIGTERM (and,
// with "clear-env", runs with an empty environment), prints its pid, then
// waits; the leader itself dies on SIGTERM.
// Usage: sup_escaper [clear-env]
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv)
{
    const bool clear_env = argc > 1 && std::strcmp(argv[1], "clear-env") == 0;
    int fds[2];
    if (pipe(fds) != 0) {
        return 1;
    }
    const pid_t child = fork();
    if (child == 0) {
        setsid();
        if (fork() == 0) {
            std::signal(SIGTERM, SIG_IGN);
            const pid_t me = getpid();
            (void)write(fds[1], &me, sizeof me);
            close(fds[1]);
            char* const args[] = {const_cast<char*>("sleep"), const_cast<char*>("1000"), nullptr};
            char* const no_env[] = {nullptr};
            execve("/bin/sleep", args, clear_env ? no_env : environ);
            _exit(127);
        }
        _exit(0);
    }
    waitpid(child, nullptr, 0);
    pid_t grandchild = 0;
    (void)read(fds[0], &grandchild, sizeof grandchild);
    std::printf("%d\n", static_cast<int>(grandchild));
    std::fflush(stdout);
    for (;;) {
        pause();
    }
}
