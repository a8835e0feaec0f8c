// register_self: a spawned worker finds the row its supervisor prepared, by the
// id and cookie the supervisor put in its environment; what the supervisor gives.
#include "tests/supervision/supervision_fixture.hpp"

#include "common/supervision/process_identity.hpp"
#include "common/base/random_id.hpp"
#include "common/recorder/self_registration.hpp"
#include "tests/support/scoped_env.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace orch;
using namespace orch::test;

namespace {

// A queued worker row, as a supervisor prepares it before the spawn.
std::string worker_row(SupervisionFixture& fx, const std::string& cookie, const std::string& status = "queued")
{
    const auto id = random_uuid();
    pqxx::work tx(*fx.conn);
    tx.exec_params0("INSERT INTO process (id, machine_id, process_type, worker_type, status, cookie, pid, ended_at) "
                    "VALUES ($1, $2, 'worker', 'snapshot', $3, $4, "
                    "        CASE WHEN $3 = 'queued' THEN NULL ELSE 4242 END, "
                    "        CASE WHEN $3 = 'exited' THEN now() END)",
                    id, fx.machine.id, status, cookie);
    tx.commit();
    return id;
}

SelfRegistration registration(const SupervisionFixture& fx)
{
    SelfRegistration reg;
    reg.machine_id = fx.machine.id;
    reg.worker_type = "snapshot";
    reg.data_dir = fx.dir.path().string();
    return reg;
}

std::string read_file(const std::filesystem::path& path)
{
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

} // namespace

TEST_CASE("register_self: the id from the environment decides between rows that share the cookie",
          "[self_registration]")
{
    SupervisionFixture fx;
    const auto cookie = random_uuid();
    const auto first = worker_row(fx, cookie);
    const auto second = worker_row(fx, cookie);
    ScopedEnv c(k_cookie_env_var, cookie.c_str());
    for (const auto& wanted : {first, second}) {
        ScopedEnv i(k_process_id_env_var, wanted.c_str());
        const auto self = register_self(*fx.conn, registration(fx));
        CHECK(self.id == wanted);
        CHECK_FALSE(self.owned);
        CHECK_FALSE(fx.column(wanted, "heartbeat_at").empty());
    }
}

TEST_CASE("register_self: an id that is not ours falls back to the cookie's row - no id finds it by the cookie",
          "[self_registration]")
{
    SupervisionFixture fx;
    const auto cookie = random_uuid();
    const auto mine = worker_row(fx, cookie);
    const auto other = worker_row(fx, random_uuid());
    ScopedEnv c(k_cookie_env_var, cookie.c_str());
    {
        ScopedEnv i(k_process_id_env_var, other.c_str());
        CHECK(register_self(*fx.conn, registration(fx)).id == mine);
        CHECK(fx.column(other, "heartbeat_at").empty()); // not touched: its cookie is another
    }
    {
        ScopedEnv i(k_process_id_env_var, "not-a-uuid");
        CHECK(register_self(*fx.conn, registration(fx)).id == mine);
    }
    {
        ScopedEnv i(k_process_id_env_var, nullptr);
        CHECK(register_self(*fx.conn, registration(fx)).id == mine);
    }
}

TEST_CASE("register_self: the exited row of an earlier run is not adopted - a row of our own is inserted",
          "[self_registration]")
{
    SupervisionFixture fx;
    const auto cookie = random_uuid();
    const auto old = worker_row(fx, cookie, "exited");
    ScopedEnv c(k_cookie_env_var, cookie.c_str());
    ScopedEnv i(k_process_id_env_var, old.c_str());
    const auto self = register_self(*fx.conn, registration(fx));
    CHECK(self.id != old);
    CHECK(self.owned);
    CHECK(fx.column(self.id, "status") == "running");
    CHECK(fx.column(self.id, "pid") == std::to_string(::getpid()));
}

TEST_CASE("launch: a worker is given its row id - unrecorded - a hook is given none even when its parent had one",
          "[self_registration][supervisor]")
{
    SupervisionFixture fx;
    Supervisor sup(*fx.conn, fx.options(GENERATE(false, true)));
    const auto script = "printf '%s' \"${" + std::string(k_process_id_env_var) + "-unset}\" > \"$1\"";
    auto worker = fx.request({"sh", "-c", script, "sh", (fx.dir.path() / "worker.out").string()}, "worker");
    worker.process_type = "worker";
    worker.env[k_process_id_env_var] = "00000000-0000-4000-8000-000000000001"; // inherited: replaced
    auto hook = fx.request({"sh", "-c", script, "sh", (fx.dir.path() / "hook.out").string()}, "hook");
    hook.env[k_process_id_env_var] = "00000000-0000-4000-8000-000000000001"; // inherited: dropped

    const auto w = sup.launch(worker);
    REQUIRE(w.started());
    REQUIRE(until_finished(sup, w.row_id));
    CHECK(read_file(fx.dir.path() / "worker.out") == w.row_id);
    CHECK(fx.column(w.row_id, "(env ? '" + std::string(k_process_id_env_var) + "')") == "false");
    // The script names the variable in its command line; the environment it sets does not.
    CHECK(read_file(worker.log_dir / ("worker." + w.row_id + ".cmd.sh")).find(std::string(k_process_id_env_var) + "=") ==
          std::string::npos);

    const auto h = sup.launch(hook);
    REQUIRE(h.started());
    REQUIRE(until_finished(sup, h.row_id));
    CHECK(read_file(fx.dir.path() / "hook.out") == "unset");
    CHECK(fx.column(h.row_id, "(env ? '" + std::string(k_process_id_env_var) + "')") == "false");
}
