#include "cache/FolderTrust.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/EnvTable.h"

namespace m3idx::cache {

namespace fs = std::filesystem;

namespace {

std::string userName(uid_t uid) {
  const passwd *pw = ::getpwuid(uid); // the name only makes the message readable
  return pw ? fmt::format("{} (uid {})", pw->pw_name, uid) : fmt::format("uid {}", uid);
}

} // namespace

Status checkTrusted(const std::string &path, const std::string &what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status(); // missing: nothing to run
  if (env::flag("M3IDX_TRUST_SHARED_CACHE"))
    return Status();
  const uid_t me = ::geteuid();
  const char *fix = "; m3idx runs the code it finds there in this process. Make it yours and not writable by "
                    "group or others (chmod go-w), or set M3IDX_TRUST_SHARED_CACHE=1 to trust it";
  // root can replace anything anyway, so root's files (an AOT bundle installed under /opt) add no risk.
  if (st.st_uid != me && st.st_uid != 0)
    return Status::error(fmt::format("{} {} is owned by {}, not by the running user {} or root{}", what, path,
                                     userName(st.st_uid), userName(me), fix));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return Status::error(fmt::format("{} {} is writable by {} (mode {:04o}){}", what, path,
                                     (st.st_mode & S_IWOTH) ? "others" : "its group", st.st_mode & 07777, fix));
  return Status();
}

Status checkTrustedParent(const std::string &path, const std::string &what) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) && st.st_uid == 0)
    return Status();
  return checkTrusted(path, what);
}

Status createPrivateFolders(const std::string &dir) {
  fs::path p;
  for (const fs::path &part : fs::path(dir)) {
    p /= part;
    if (::mkdir(p.c_str(), 0700) == 0) {
      ::chmod(p.c_str(), 0700); // mkdir's mode is masked by the umask
    } else if (errno != EEXIST) {
      return Status::error(fmt::format("cannot create the folder {}: {}", p.string(), std::strerror(errno)));
    }
  }
  return Status();
}

} // namespace m3idx::cache
