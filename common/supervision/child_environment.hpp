#pragma once

#include <map>
#include <string>
#include <vector>

// The environment a supervised child is given and what of it is recorded.
namespace orch {

// True for names that reach the database (DATABASE_URL, PG*...): never given to a child.
bool is_database_variable(const std::string& name);
// True for names that look like credentials (…PASSWORD, …SECRET, …TOKEN, …KEY...).
bool is_secret_variable(const std::string& name);

// `env` minus database variables and an inherited ORCH_PROCESS_ID, plus the
// cookie (ORCH_PROCESS_COOKIE).
std::map<std::string, std::string> child_environment(std::map<std::string, std::string> env,
                                                     const std::string& cookie);
// Copy with secret values replaced by "<redacted>", for the process row.
std::map<std::string, std::string> redacted(const std::map<std::string, std::string>& env);
// Names of the secret variables in `env`.
std::vector<std::string> secret_names(const std::map<std::string, std::string>& env);

} // namespace orch
