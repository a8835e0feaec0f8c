// The raw baseline's snapshot worker: what one worker minimally costs, with
// nothing of ours. Opens one PostgreSQL connection (DATABASE_URL), runs one
// trivial query, then for each of <snapshots> snapshots spawns and waits for each
// hook given in argv in turn, and exits.
//   bench_raw_worker <snapshots> <hook> [<hook>...]
#include <libpq-fe.h>

#include <cstdio>
#include <cstdlib>

#include <spawn.h>
#include <sys/wait.h>

int main(int argc, char** argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: bench_raw_worker <snapshots> <hook> [<hook>...]\n");
        return 2;
    }
    const long snapshots = std::atol(argv[1]);
    const char* url = std::getenv("DATABASE_URL");
    PGconn* conn = PQconnectdb(url != nullptr ? url : "");
    if (PQstatus(conn) != CONNECTION_OK) {
        std::fprintf(stderr, "bench_raw_worker: %s", PQerrorMessage(conn));
        return 1;
    }
    PQclear(PQexec(conn, "SELECT 1"));
    for (long s = 0; s < snapshots; ++s) {
        for (int i = 2; i < argc; ++i) {
            char* const hook_argv[] = {argv[i], nullptr};
            char* const envp[] = {nullptr};
            pid_t pid = 0;
            if (posix_spawn(&pid, argv[i], nullptr, nullptr, hook_argv, envp) != 0) {
                return 1;
            }
            int status = 0;
            waitpid(pid, &status, 0);
        }
    }
    PQfinish(conn);
    return 0;
}
