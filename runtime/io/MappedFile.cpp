#include "runtime/io/MappedFile.h"

#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <mutex>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace braid {
namespace {

// The read() in progress on this thread: where to jump, and the mapping a
// fault must fall in to be ours.
struct ActiveRead {
  sigjmp_buf jump;
  const uint8_t *begin = nullptr;
  const uint8_t *end = nullptr;
};
thread_local ActiveRead *tActiveRead = nullptr;

struct sigaction gPreviousBusAction;

void onBusError(int sig, siginfo_t *info, void *context) {
  ActiveRead *active = tActiveRead;
  const auto *addr = static_cast<const uint8_t *>(info->si_addr);
  if (active != nullptr && addr >= active->begin && addr < active->end)
    siglongjmp(active->jump, 1);
  // Not a read of a mapped file: what would have happened without us.
  if (gPreviousBusAction.sa_flags & SA_SIGINFO) {
    gPreviousBusAction.sa_sigaction(sig, info, context);
    return;
  }
  if (gPreviousBusAction.sa_handler != SIG_DFL &&
      gPreviousBusAction.sa_handler != SIG_IGN) {
    gPreviousBusAction.sa_handler(sig);
    return;
  }
  std::signal(SIGBUS, SIG_DFL); // the faulting read repeats and kills
}

void installBusHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = onBusError;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &gPreviousBusAction);
  });
}

bool sameTime(const timespec &a, const timespec &b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

} // namespace

absl::StatusOr<MappedFile> MappedFile::open(const std::string &path,
                                            absl::string_view what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string message = absl::StrCat("cannot open the ", what, " file '",
                                       path, "': ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message)
                         : absl::InvalidArgumentError(message);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("the ", what, " path '", path, "' is not a regular file"));
  }
  MappedFile file;
  file.fd_ = fd;
  file.mtime_ = st.st_mtim;
  file.path_ = path;
  file.what_ = std::string(what);
  if (st.st_size > 0) {
    void *p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ,
                     MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot map the ", what, " file '", path, "': ", std::strerror(err)));
    }
    file.data_ = static_cast<uint8_t *>(p);
    file.size_ = static_cast<uint64_t>(st.st_size);
  }
  installBusHandler();
  return file;
}

absl::Status MappedFile::read(absl::FunctionRef<void()> reader) const {
  ActiveRead active;
  active.begin = data_;
  active.end = data_ + size_;
  ActiveRead *outer = tActiveRead;
  if (sigsetjmp(active.jump, 1) != 0) {
    tActiveRead = outer;
    return absl::DataLossError(absl::StrCat(
        "the ", what_, " file '", path_,
        "' was truncated while in use (reading it failed with SIGBUS): "
        "restore it, then resume from the last checkpoint"));
  }
  tActiveRead = &active;
  reader();
  tActiveRead = outer;
  return absl::OkStatus();
}

absl::Status MappedFile::checkUnchanged() const {
  if (fd_ < 0)
    return absl::OkStatus();
  struct stat st;
  if (::fstat(fd_, &st) != 0)
    return absl::DataLossError(
        absl::StrCat("cannot check the ", what_, " file '", path_,
                     "': ", std::strerror(errno)));
  if (static_cast<uint64_t>(st.st_size) != size_)
    return absl::DataLossError(absl::StrCat(
        "the ", what_, " file '", path_, "' changed while in use: it had ",
        size_, " bytes and now has ", st.st_size,
        "; restore it, then resume from the last checkpoint"));
  if (!sameTime(st.st_mtim, mtime_))
    return absl::DataLossError(absl::StrCat(
        "the ", what_, " file '", path_,
        "' was rewritten while in use (its modification time changed); "
        "restore it, then resume from the last checkpoint"));
  return absl::OkStatus();
}

MappedFile::MappedFile(MappedFile &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      fd_(std::exchange(other.fd_, -1)), mtime_(other.mtime_),
      path_(std::move(other.path_)), what_(std::move(other.what_)) {}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
    mtime_ = other.mtime_;
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
  }
  return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (data_ != nullptr)
    ::munmap(data_, static_cast<size_t>(size_));
  if (fd_ >= 0)
    ::close(fd_);
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

absl::Status readMapped(const MappedFile *file,
                        absl::FunctionRef<void()> reader) {
  if (file != nullptr)
    return file->read(reader);
  reader();
  return absl::OkStatus();
}

} // namespace braid
