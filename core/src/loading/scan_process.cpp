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

struct Job {
  pid_t pid = -1;
  int fd[2] = {-1, -1};  // read ends of the child's stdout and stderr
  Clock::time_point deadline;
  bool done = false;
};

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

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
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return r.start_error = strerror(errno), false;
  if (pipe2(err, O_CLOEXEC) != 0) {
    r.start_error = strerror(errno);
    close(out[0]), close(out[1]);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);  // dup2 clears O_CLOEXEC on 1 and 2
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  // The child starts with no blocked signal and SIGPIPE at its default, whatever this process set.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(&job.pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]), close(err[1]);
  if (rc != 0) {
    r.start_error = strerror(rc);
    close(out[0]), close(err[0]);
    job.pid = -1;
    return false;
  }
  job.fd[0] = out[0], job.fd[1] = err[0];
  job.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeout_s));
  return true;
}

// Ends the job once its process has exited (or at its deadline, killing it first).
void reap(Job& job, ProcessResult& r) {
  int status = 0;
  pid_t got = waitpid(job.pid, &status, WNOHANG);
  if (got == 0 && Clock::now() < job.deadline) return;
  if (got == 0) {  // past its deadline
    kill(job.pid, SIGKILL);
    while ((got = waitpid(job.pid, &status, 0)) < 0 && errno == EINTR) {
    }
    r.timed_out = true;
  }
  r.wait_status = got == job.pid ? status : 0;  // ECHILD: SIGCHLD ignored, the status is lost
  // A grandchild may hold the pipes open: take what is already there, no more.
  drain(job.fd[0], r.out, true);
  drain(job.fd[1], r.err, true);
  close_fd(job.fd[0]), close_fd(job.fd[1]);
  job.done = true;
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
    // Short waits: a child that has exited is noticed through waitpid, not only through EOF.
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
