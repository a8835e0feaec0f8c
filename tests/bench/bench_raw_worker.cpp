// The raw baseline's snapshot worker: what one worker minimally costs, with
// nothing of ours. Opens one PostgreSQL connection (DATABASE_URL), runs one
// trivial query, then for each of <snapshots> snapshots spawns and waits for each
// hook given in argv in turn, and exits.
// With --record FIRST it also keeps the minimal records of that work, one plain
// statement each, in tables bench_crawl creates (raw_process, raw_snapshot): a
// row per hook inserted before its spawn and updated with its pid and exit code
// after (asynchronous commit, as ours), and a durable seal of each snapshot,
// numbered from FIRST (synchronous commit, as ours).
// With --add N it is instead the raw loop's `orchestrator add`: it inserts the
// N snapshot rows (ids 0..N-1) into raw_snapshot in one durable statement and
// exits, so that the raw loop's window, like ours, opens with a process that
// queues the work.
// With BENCH_USAGE_FILE set, it appends the CPU seconds of the hooks it reaped
// to that file (one line) before it exits: bench_crawl splits its CPU with it.
//   bench_raw_worker [--record FIRST] <snapshots> <hook> [<hook>...]
//   bench_raw_worker --add <snapshots>
#include <libpq-fe.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

namespace {

// Runs a prepared statement; false (with a message) when it fails.
bool exec(PGconn* conn, const char* name, int n, const char* const* values, std::string* first_value = nullptr)
{
    PGresult* r = PQexecPrepared(conn, name, n, values, nullptr, nullptr, 0);
    const auto status = PQresultStatus(r);
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!ok) {
        std::fprintf(stderr, "bench_raw_worker: %s: %s", name, PQerrorMessage(conn));
    } else if (first_value != nullptr) {
        *first_value = PQgetvalue(r, 0, 0);
    }
    PQclear(r);
    return ok;
}

bool prepare(PGconn* conn, const char* name, const char* sql)
{
    PGresult* r = PQprepare(conn, name, sql, 0, nullptr);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) {
        std::fprintf(stderr, "bench_raw_worker: prepare %s: %s", name, PQerrorMessage(conn));
    }
    PQclear(r);
    return ok;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 3 && std::strcmp(argv[1], "--add") == 0) {
        const char* url = std::getenv("DATABASE_URL");
        PGconn* conn = PQconnectdb(url != nullptr ? url : "");
        if (PQstatus(conn) != CONNECTION_OK) {
            std::fprintf(stderr, "bench_raw_worker: %s", PQerrorMessage(conn));
            return 1;
        }
        const char* count[] = {argv[2]};
        const bool ok = prepare(conn, "add", "INSERT INTO raw_snapshot (id) SELECT g FROM generate_series(0, $1::int - 1) g") &&
                        exec(conn, "add", 1, count);
        PQfinish(conn);
        return ok ? 0 : 1;
    }
    int arg = 1;
    long first = -1;
    if (argc > 2 && std::strcmp(argv[1], "--record") == 0) {
        first = std::atol(argv[2]);
        arg = 3;
    }
    if (argc - arg < 2) {
        std::fprintf(stderr, "usage: bench_raw_worker [--record FIRST] <snapshots> <hook> [<hook>...]\n"
                             "       bench_raw_worker --add <snapshots>\n");
        return 2;
    }
    const long snapshots = std::atol(argv[arg]);
    const int hooks = arg + 1;
    const char* url = std::getenv("DATABASE_URL");
    PGconn* conn = PQconnectdb(url != nullptr ? url : "");
    if (PQstatus(conn) != CONNECTION_OK) {
        std::fprintf(stderr, "bench_raw_worker: %s", PQerrorMessage(conn));
        return 1;
    }
    PQclear(PQexec(conn, "SELECT 1"));
    const bool record = first >= 0;
    if (record &&
        !(prepare(conn, "start",
                  "INSERT INTO raw_process (snapshot_id, hook) SELECT $1::int, $2 "
                  "FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit RETURNING id") &&
          prepare(conn, "exit",
                  "UPDATE raw_process SET pid = $2::int, exit_code = $3::int, ended_at = now() "
                  "FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit WHERE id = $1::bigint") &&
          prepare(conn, "seal", "UPDATE raw_snapshot SET sealed_at = now() WHERE id = $1::int"))) {
        return 1;
    }
    for (long s = 0; s < snapshots; ++s) {
        const std::string snapshot = std::to_string(first + s);
        for (int i = hooks; i < argc; ++i) {
            std::string row;
            const char* start[] = {snapshot.c_str(), argv[i]};
            if (record && !exec(conn, "start", 2, start, &row)) {
                return 1;
            }
            char* const hook_argv[] = {argv[i], nullptr};
            char* const envp[] = {nullptr};
            pid_t pid = 0;
            if (posix_spawn(&pid, argv[i], nullptr, nullptr, hook_argv, envp) != 0) {
                return 1;
            }
            int status = 0;
            waitpid(pid, &status, 0);
            const std::string pid_text = std::to_string(pid);
            const std::string code = std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            const char* exit[] = {row.c_str(), pid_text.c_str(), code.c_str()};
            if (record && !exec(conn, "exit", 3, exit)) {
                return 1;
            }
        }
        const char* seal[] = {snapshot.c_str()};
        if (record && !exec(conn, "seal", 1, seal)) {
            return 1;
        }
    }
    PQfinish(conn);
    if (const char* path = std::getenv("BENCH_USAGE_FILE"); path != nullptr && *path != '\0') {
        struct rusage ru{};
        getrusage(RUSAGE_CHILDREN, &ru);
        auto seconds = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; };
        // One short line in append mode: the workers' lines do not interleave.
        if (FILE* out = std::fopen(path, "a")) {
            std::fprintf(out, "%.6f\n", seconds(ru.ru_utime) + seconds(ru.ru_stime));
            std::fclose(out);
        }
    }
    return 0;
}
