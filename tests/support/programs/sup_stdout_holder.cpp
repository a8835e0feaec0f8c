// Stand-in hook: leaves a grandchild holding stdout/stderr open for
// `seconds`, then exits 0 at once. Exit detection must not wait for EOF.
// Usage: sup_stdout_holder [seconds=30]
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

int main(int argc, char** argv)
{
    const int seconds = argc > 1 ? std::atoi(argv[1]) : 30;
    std::printf("leader done\n");
    std::fflush(stdout);
    if (fork() == 0) {
        sleep(static_cast<unsigned>(seconds));
        _exit(0);
    }
    return 0;
}
