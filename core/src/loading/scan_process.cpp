#include "loading/scan_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

extern char** environ;

namespace moe::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kCap = size_t(1) << 20;

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// The child leads its own process group (POSIX_SPAWN_SETPGROUP), so this also ends whatever a
// plugin forked; the child itself is named too in case it left the group. Only while the child
// is not yet reaped: its pid, and so its group's id, cannot be reused before.
void kill_group(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

// waitpid(pid, 0) through EINTR; the pid, or -1 (ECHILD: SIGCHLD is ignored here, so the system
// reaped the child and its status is lost).
pid_t wait_for(pid_t pid, int& status) {
  pid_t got;
  while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  return got;
}

// One child. The destructor is for unwinding (bad_alloc while collecting output, say): no child
// outlives run_processes and no pipe is left open, whatever threw.
struct Job {
  pid_t pid = -1;
  int fd[2] = {-1, -1};  // read ends of the child's stdout and stderr
  Clock::time_point deadline;
  bool done = false;
  bool killed = false;  // we sent SIGKILL at the deadline

  Job() = default;
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  ~Job() {
    if (pid > 0 && !done) {
      int status = 0;
      kill_group(pid);
      wait_for(pid, status);
    }
    close_fd(fd[0]);
    close_fd(fd[1]);
  }
};

// Reads what is there; closes the pipe at its end. `wait`: poll first (the caller did not).
void drain(int& fd, std::string& into, bool wait) {
  while (fd >= 0) {
    if (wait) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) return;
    }
    char buf[65536];
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return close_fd(fd);
    into.append(buf, size_t(std::min<size_t>(size_t(n), kCap - std::min(kCap, into.size()))));
    if (!wait) return;  // one read per poll wake-up
  }
}

bool start(const std::vector<std::string>& argv, Job& job, ProcessResult& r, double timeout_s) {
  // Everything that allocates comes first: a throw must not leave the pipes below open.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return r.start_error = strerror(errno), false;
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out[0]), close(out[1]);
    return r.start_error = strerror(e), false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);  // dup2 clears O_CLOEXEC on 1 and 2
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // The child starts with no blocked signal and SIGPIPE at its default, whatever this process set,
  // in a process group of its own (pgid = its pid) so that a time-out kills what it forked too.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const int rc = posix_spawn(&job.pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]), close(err[1]);
  if (rc != 0) {
    close(out[0]), close(err[0]);
    job.pid = -1;
    return r.start_error = strerror(rc), false;
  }
  job.fd[0] = out[0], job.fd[1] = err[0];
  job.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_s));
  return true;
}

// Ends the job once its process has exited, or at its deadline after killing it.
void reap(Job& job, ProcessResult& r) {
  siginfo_t info{};
  // WNOWAIT: an exited child stays a zombie until its group has been killed below.
  const int rc = waitid(P_PID, id_t(job.pid), &info, WEXITED | WNOHANG | WNOWAIT);
  if (rc < 0 && errno == EINTR) return;
  int status = 0;
  pid_t got = -1;
  if (rc == 0) {  // else ECHILD: already reaped by the system, nothing left to kill or wait for
    if (info.si_pid == 0) {  // still running
      if (Clock::now() < job.deadline) return;
      job.killed = true;
    }
    // At the deadline the child and its group; after an exit, what the plugin left running.
    kill_group(job.pid);
    got = wait_for(job.pid, status);
  }
  // Only our SIGKILL makes a time-out: a child that exited between the poll above and the kill
  // keeps its answer. (A lost status after our kill counts as the kill.)
  r.timed_out =
      job.killed && (got != job.pid || (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  r.wait_status = got == job.pid ? status : 0;
  job.done = true;
  // A grandchild that left the group may hold the pipes open: take what is already there.
  drain(job.fd[0], r.out, true);
  drain(job.fd[1], r.err, true);
  close_fd(job.fd[0]), close_fd(job.fd[1]);
}

}  // namespace

std::vector<ProcessResult> run_processes(const std::vector<std::vector<std::string>>& argvs,
                                         double timeout_s, int parallel) {
  std::vector<ProcessResult> results(argvs.size());
  std::vector<Job> jobs(argvs.size());
  size_t next = 0;
  for (;;) {
    size_t active = 0;
    for (const auto& j : jobs) active += j.pid > 0 && !j.done;
    for (; active < size_t(std::max(parallel, 1)) && next < argvs.size(); ++next)
      active += start(argvs[next], jobs[next], results[next], timeout_s);
    if (active == 0 && next == argvs.size()) break;
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, int>> owner;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].pid <= 0 || jobs[i].done) continue;
      for (int k = 0; k < 2; ++k) {
        if (jobs[i].fd[k] < 0) continue;
        fds.push_back({jobs[i].fd[k], POLLIN, 0});
        owner.emplace_back(i, k);
      }
    }
    // Short waits: a child that has exited is noticed through waitid, not only through EOF.
    if (poll(fds.data(), fds.size(), 20) > 0) {
      for (size_t f = 0; f < fds.size(); ++f) {
        if (fds[f].revents == 0) continue;
        auto [i, k] = owner[f];
        drain(jobs[i].fd[k], k == 0 ? results[i].out : results[i].err, false);
      }
    }
    for (size_t i = 0; i < jobs.size(); ++i)
      if (jobs[i].pid > 0 && !jobs[i].done) reap(jobs[i], results[i]);
  }
  return results;
}

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

}  // namespace moe::detail
