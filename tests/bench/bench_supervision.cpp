// Not a test: prints what supervision costs on this machine.
//  1. launch+record+reap of a no-op hook through Supervisor, against a raw
//     posix_spawn+waitpid of the same program, as a ratio;
//  2. teardown precision: 50 trees of 20 TERM-ignoring processes with
//     staggered deadlines; how long after its deadline each tree was gone.
// Needs TEST_DATABASE_URL (or DATABASE_URL) like the tests.
#include "tests/supervision/supervision_fixture.hpp"

#include <algorithm>
#include <cstdio>

#include <spawn.h>
#include <sys/wait.h>

using namespace orch;
using namespace orch::test;
using Clock = std::chrono::steady_clock;

namespace {

double raw_spawn_us(int runs)
{
    char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    char* const envp[] = {nullptr};
    const auto t0 = Clock::now();
    for (int i = 0; i < runs; ++i) {
        pid_t pid = 0;
        posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, envp);
        waitpid(pid, nullptr, 0);
    }
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / runs;
}

} // namespace

int main(int argc, char** argv)
{
    const int runs = argc > 1 ? std::atoi(argv[1]) : 300;
    const bool fallback = argc > 2 && std::string(argv[2]) == "fallback";
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(fallback));
    std::printf("containment: %s\n", std::string(to_string(sup.containment_mode())).c_str());

    const double raw = raw_spawn_us(runs);
    const auto t0 = Clock::now();
    for (int i = 0; i < runs; ++i) {
        sup.wait(sup.launch(fx.request({"/bin/true"})).row_id);
    }
    const double supervised = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / runs;
    std::printf("per hook: supervised %.0f us, raw posix_spawn+waitpid %.0f us, ratio %.1f\n", supervised, raw,
                supervised / raw);

    std::map<std::string, double> timeouts;
    for (int i = 0; i < 50; ++i) {
        auto req = fx.request({"sh", "-c", "trap '' TERM; for i in $(seq 19); do sleep 1000 & done; wait"});
        req.timeout_s = 2.0 + 0.02 * i;
        timeouts[sup.launch(req).row_id] = *req.timeout_s;
    }
    const auto outcomes = sup.teardown({}, std::chrono::seconds(30));
    std::vector<double> late_ms;
    for (const auto& o : outcomes) {
        late_ms.push_back(static_cast<double>(o.elapsed.count()) - timeouts[o.row_id] * 1000.0);
    }
    std::sort(late_ms.begin(), late_ms.end());
    if (!late_ms.empty()) {
        std::printf("teardown of %zu trees x 20 processes: gone after deadline min %.0f ms, median %.0f ms, max %.0f ms\n",
                    late_ms.size(), late_ms.front(), late_ms[late_ms.size() / 2], late_ms.back());
    }
    return 0;
}
