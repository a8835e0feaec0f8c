// Probe for test_lean_exec.cpp: re-executes itself as every entry point does,
// then reports what it sees, one "key=value" per line.
#include "common/config/lean_exec.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <stdlib.h>

int main(int, char** argv)
{
    // Counts the images this process ran: the re-exec passes the environment on.
    const char* before = std::getenv("PROBE_STARTS");
    const int starts = (before ? std::atoi(before) : 0) + 1;
    ::setenv("PROBE_STARTS", std::to_string(starts).c_str(), 1);
    orch::reexec_without_gnutls_init(argv);
    std::printf("starts=%d\n", starts);
    // The environment this image was exec'd with, as the kernel keeps it.
    std::ifstream in("/proc/self/environ");
    const std::string initial((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ifstream comm_file("/proc/self/comm");
    std::string comm;
    std::getline(comm_file, comm);
    const char* now = std::getenv("GNUTLS_NO_IMPLICIT_INIT");
    std::printf("exec_env=%s\n", initial.find("GNUTLS_NO_IMPLICIT_INIT=1") != std::string::npos ? "yes" : "no");
    std::printf("getenv=%s\n", now ? now : "unset");
    std::printf("marker=%s\n", std::getenv("ORCH_LEAN_EXEC") ? "set" : "unset");
    std::printf("comm=%s\n", comm.c_str());
    std::fflush(stdout);
    // What a child (a hook) inherits.
    return std::system("echo child=${GNUTLS_NO_IMPLICIT_INIT:-unset}") == 0 ? 0 : 1;
}
