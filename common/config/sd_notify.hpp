#pragma once

#include <string>

namespace orch {

// Sends a state line ("READY=1", "STOPPING=1", "STATUS=...") to systemd when
// NOTIFY_SOCKET is set (Type=notify units); does nothing otherwise. Never throws:
// a supervisor that cannot be told is not a reason to stop working.
void sd_notify(const std::string& state);

} // namespace orch
