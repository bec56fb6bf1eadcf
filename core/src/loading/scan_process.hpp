// Child processes for the plugin scanner: spawned (posix_spawn, i.e. fork+exec of a small binary,
// never a bare fork of this possibly multi-threaded process), their stdout and stderr collected,
// each killed when it outlives its time-out. Nothing a child does can reach this process. Each
// child leads a process group of its own, killed whole when the child ends or times out, so that
// what a plugin forked does not outlive its scan.
#pragma once

#include <string>
#include <vector>

namespace moe::detail {

struct ProcessResult {
  std::string start_error;  // non-empty: the process could not be started (strerror)
  bool timed_out = false;   // killed by our SIGKILL at the time-out (not: exited just before it)
  int wait_status = 0;      // waitpid's status (WIFEXITED / WIFSIGNALED), unless timed out
  std::string out, err;     // what it wrote (each capped at 1 MiB)
};

// Runs every command line (argv[0] is the executable's path), at most `parallel` at once, each
// with stdin from /dev/null and killed `timeout_s` seconds after it started. In order of `argvs`.
// When it throws (bad_alloc), every child it started has been killed and reaped first.
std::vector<ProcessResult> run_processes(const std::vector<std::vector<std::string>>& argvs,
                                         double timeout_s, int parallel);

// "SIGSEGV" for 11, "signal 77" for what has no name.
std::string signal_name(int signal);

}  // namespace moe::detail
