#include "core/AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace m3idx {

namespace {

constexpr std::string_view kTempSuffix = ".tmpXXXXXX";

StatusOr<std::string> writeTemp(const std::string &path, std::string_view content) {
  std::string tmp = path + std::string(kTempSuffix);
  int fd = mkstemp(tmp.data());
  if (fd < 0)
    return invalidArgument(path, "a writable location", std::strerror(errno));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return invalidArgument(path, "a successful write", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return invalidArgument(path, "a successful write", err);
  }
  ::chmod(tmp.c_str(), 0644); // mkstemp creates 0600; outputs are ordinary files
  return tmp;
}

} // namespace

bool isUnfinishedWrite(std::string_view name) {
  return name.size() > kTempSuffix.size() &&
         name.substr(name.size() - kTempSuffix.size(), 4) == kTempSuffix.substr(0, 4);
}

Status writeFileAtomically(const std::string &path, std::string_view content) {
  return writeFilesAtomically({{path, std::string(content)}});
}

Status writeFilesAtomically(const std::vector<PendingFile> &files) {
  std::vector<std::string> temps;
  for (const PendingFile &f : files) {
    StatusOr<std::string> tmp = writeTemp(f.path, f.content);
    if (!tmp.ok()) {
      for (const std::string &t : temps)
        ::unlink(t.c_str());
      return tmp.status();
    }
    temps.push_back(*tmp);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temps[i].c_str(), files[i].path.c_str()) != 0) {
      std::string err = std::strerror(errno);
      for (size_t j = i; j < temps.size(); ++j)
        ::unlink(temps[j].c_str());
      return invalidArgument(files[i].path, "a successful rename", err);
    }
  }
  return Status();
}

} // namespace m3idx
