// Stand-in hook that burns a known amount of CPU: forks `children` children that
// each spin until their own CPU clock reaches `seconds`, waits for them, then
// spins as long itself. Its reaped CPU is then at least (children + 1) x seconds.
// Usage: sup_spinner <seconds> [children=0]
#include <cstdlib>
#include <ctime>

#include <sys/wait.h>
#include <unistd.h>

namespace {

void spin(double seconds)
{
    volatile unsigned long sink = 0;
    for (;;) {
        timespec now{};
        ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
        if (static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9 >= seconds) {
            return;
        }
        for (int i = 0; i < 10000; ++i) {
            sink = sink + static_cast<unsigned long>(i);
        }
    }
}

} // namespace

int main(int argc, char** argv)
{
    const double seconds = argc > 1 ? std::atof(argv[1]) : 0.1;
    const int children = argc > 2 ? std::atoi(argv[2]) : 0;
    for (int i = 0; i < children; ++i) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            spin(seconds);
            ::_exit(0);
        }
        if (pid < 0) {
            return 1;
        }
    }
    while (::wait(nullptr) > 0) {
    }
    spin(seconds);
    return 0;
}
