#pragma once

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include <optional>
#include <string>

// The event journal (migration 0012, `ops.events`): operator actions and the
// decisions a process takes on its own that an operator asks about afterwards.
// Rare by construction: never written per snapshot or per hook.
namespace orch {

struct Event {
    std::string kind;    // "<noun>.<verb>", e.g. "crawl.cancel_requested"
    std::string message; // one line for a person
    std::optional<std::string> crawl_id;
    std::optional<std::string> snapshot_id;
    std::optional<std::string> process_id; // the acting process's row
    nlohmann::json detail = nlohmann::json::object();
};

// The machine this process acts on (as detected, or --machine-id), recorded with
// each of its events, so that each machine's events can be told apart (the
// orchestrator's metrics count its own). Call once, after parsing options.
void set_event_machine_id(std::string machine_id);

// Who acts: "cli", "orchestrator", "crawl_worker" or "snapshot_worker". The OS
// user is this process's effective user.
// Inside `tx`, so that the event commits with the change it describes; throws
// what pqxx throws.
void record_event(pqxx::transaction_base& tx, const std::string& actor, const Event& event);

// In a transaction of its own, for a decision with no transaction to join.
// Failures are logged, never thrown: the journal must not stop the work it
// describes.
void record_event(pqxx::connection& conn, const std::string& actor, const Event& event) noexcept;

} // namespace orch
