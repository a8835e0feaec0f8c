// Stand-in hook: ignores SIGTERM and grows a tree of `fanout` x `fanout2`
// descendants that ignore SIGTERM too, then waits forever.
// Usage: sup_forker [fanout=40] [fanout2=30]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

int main(int argc, char** argv)
{
    const int fanout = argc > 1 ? std::atoi(argv[1]) : 40;
    const int fanout2 = argc > 2 ? std::atoi(argv[2]) : 30;
    std::signal(SIGTERM, SIG_IGN);
    for (int i = 0; i < fanout; ++i) {
        if (fork() == 0) {
            for (int j = 0; j < fanout2; ++j) {
                if (fork() == 0) {
                    for (;;) {
                        pause();
                    }
                }
            }
            for (;;) {
                pause();
            }
        }
    }
    std::printf("forked\n");
    std::fflush(stdout);
    for (;;) {
        pause();
    }
}
