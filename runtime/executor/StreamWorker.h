// One stream of the executor: a thread, created once, that runs one job at a
// time on request. The executor hands it the stream's share of a program at
// the start of each run and collects it at the end.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace braid {

class StreamWorker {
public:
  StreamWorker();
  // Joins the thread; must not be called while a job is running.
  ~StreamWorker();
  StreamWorker(const StreamWorker &) = delete;
  StreamWorker &operator=(const StreamWorker &) = delete;

  // Starts `job` on the worker thread. The previous job must have been
  // collected with finish().
  void start(std::function<void()> job);
  // Blocks until the job given to start() has returned.
  void finish();

private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::function<void()> job_;
  bool busy_ = false;
  bool quit_ = false;
  std::thread thread_;
};

} // namespace braid
