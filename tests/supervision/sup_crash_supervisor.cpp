// A supervising process for the crash test. Launches a deaf shell, an
// escaper and a small forker, prints "ready <self-row> <hook-rows...>" and
// then supervises until it is SIGKILLed.
// Usage: sup_crash_supervisor <db-url> <machine-id> <scope> <fallback 0|1> <programs-dir> <log-dir>
#include "common/recorder/supervisor.hpp"

#include <iostream>

#include <poll.h>

int main(int argc, char** argv)
{
    if (argc != 7) {
        return 2;
    }
    pqxx::connection conn(argv[1]);
    orch::SupervisorOptions options;
    options.machine_id = argv[2];
    options.containment.scope = argv[3];
    options.containment.force_fallback = std::string(argv[4]) == "1";
    orch::Supervisor sup(conn, options);
    const std::string programs = argv[5];
    auto request = [&](std::vector<std::string> args, std::string name) {
        orch::LaunchRequest r;
        r.argv = std::move(args);
        r.env = {{"PATH", "/usr/bin:/bin"}};
        r.pwd = argv[6];
        r.log_dir = argv[6];
        r.name = std::move(name);
        return r;
    };
    std::string line = "ready " + sup.self_row_id();
    for (auto&& r : {request({"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}, "deaf"),
                     request({programs + "/sup_escaper"}, "escaper"),
                     request({programs + "/sup_forker", "5", "5"}, "forker")}) {
        line += " " + sup.launch(r).row_id;
    }
    std::cout << line << std::endl;
    for (;;) {
        pollfd p{sup.epoll_fd(), POLLIN, 0};
        ::poll(&p, 1, 1000);
        sup.process_events();
    }
}
