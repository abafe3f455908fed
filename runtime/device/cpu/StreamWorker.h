// One CPU stream other than 0: a thread, created once, that runs the work
// queued on it in order, as a GPU stream does. The executor's host thread
// queues each instruction of the stream as it issues the program, and
// drains every worker before the run returns.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace braid {

class StreamWorker {
public:
  StreamWorker();
  // Joins the thread; the queue must be drained.
  ~StreamWorker();
  StreamWorker(const StreamWorker &) = delete;
  StreamWorker &operator=(const StreamWorker &) = delete;

  // Queues `work` after everything queued before it.
  void post(std::function<void()> work);
  // Blocks until everything queued so far has run.
  void drain();

private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false; // a job taken from the queue is running
  bool quit_ = false;
  std::thread thread_;
};

} // namespace braid
