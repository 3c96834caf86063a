#include "plan/tune_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>
#include <string_view>
#include <thread>

#include "core/env.h"
#include "core/format.h"
#include "core/poll.h"
#include "tpgemm/version.h"

namespace tpgemm::plan {
namespace {

// Format 2 added the matmul field; a file of an older format is started anew by the next store.
constexpr int kFormat = 2;
constexpr const char* kHeader = "tpgemm-tune-cache 2";
constexpr const char* kHeaderPrefix = "tpgemm-tune-cache ";
constexpr int kFields = 6;          // key, impl, chunks, comm_sms, matmul, detail
constexpr int kLineWarnings = 3;    // then one that counts the rest

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

// mkdir -p of the file's directory; false on failure.
bool make_parent_dirs(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// The format a header line names: kFormat for ours, another number for another tpgemm's, nullopt
// for a file that is no tuning cache.
std::optional<int64_t> header_format(const std::string& first) {
  if (first.rfind(kHeaderPrefix, 0) != 0) return std::nullopt;
  return parse_int(first.substr(std::strlen(kHeaderPrefix)));
}

// An open file under flock, released (and closed) on destruction. The lock is advisory and is
// waited for at most TuneCache::kLockWaitMs; where the file system offers no locks (ENOLCK,
// EOPNOTSUPP, as some network ones), the file is used without one: appends of whole lines and
// renames keep it readable either way.
class LockedFile {
 public:
  LockedFile(const std::string& path, int flags, int lock) {
    fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(TuneCache::kLockWaitMs);
    timed_out_ = !poll_until(deadline, [&] {
      if (::flock(fd_, lock | LOCK_NB) == 0) return true;
      if (errno != EWOULDBLOCK && errno != EINTR) return true;  // no locks here
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return false;
    });
  }
  ~LockedFile() {
    if (fd_ >= 0) ::close(fd_);  // (releases the lock)
  }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;
  int fd() const { return fd_; }
  bool timed_out() const { return timed_out_; }
  // Whether `path` still names this file: a store that rewrote it (a rename) while this process
  // waited for the lock leaves this one unlinked, and a line appended there would be lost.
  bool still_at(const std::string& path) const {
    struct stat open_st {}, path_st {};
    return ::fstat(fd_, &open_st) == 0 && ::stat(path.c_str(), &path_st) == 0 && open_st.st_ino == path_st.st_ino &&
           open_st.st_dev == path_st.st_dev;
  }

 private:
  int fd_ = -1;
  bool timed_out_ = false;
};

std::optional<std::string> read_all(int fd) {
  std::string out;
  char buf[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof(buf), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
}

bool write_all(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Whether `text` is no more than the start of a header: a file just created, or one whose first
// write was cut short (a full disk, a process that died): no entries, and nothing to keep.
bool header_at_most(const std::string& text) {
  return text.find('\n') == std::string::npos && std::string_view(kHeader).substr(0, text.size()) == text;
}

// The file's lines after the header, split at '\n' (a last line without one included).
std::vector<std::string> body_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Writes `text` to a file beside `path` (named by host and process, so that no two writers share
// it; with permissions `mode`), flushes it to the disk and renames it over `path`: readers see
// the old file or the new one.
bool replace_file(const std::string& path, const std::string& text, mode_t mode, std::string& why) {
  char host[64] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string tmp = strfmt("%s.%s.%d.tmp", path.c_str(), host, static_cast<int>(::getpid()));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  // (the file's own permissions: one that a group shares stays writable by the group)
  bool ok = fd >= 0 && ::fchmod(fd, mode & 07777) == 0 && write_all(fd, text) && ::fsync(fd) == 0;
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  ok = ok && std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    why = std::strerror(errno);
    std::remove(tmp.c_str());
  }
  return ok;
}

// The newest keys' last lines of all their fields, in the order they were last stored, as many as
// fit in half of TuneCache::kCompactBytes (and at most kKeepKeys): the file is then rewritten again
// only after as much again has been added. Their values are not checked here: find() judges them.
std::string compacted(const std::vector<std::string>& lines) {
  std::map<std::string, size_t> last;  // key -> index of its last whole line (a cut one never hides it)
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<std::string> f = split_tabs(lines[i]);
    if (f.size() == kFields) last[f[0]] = i;
  }
  std::vector<size_t> newest;
  for (const auto& [key, i] : last) newest.push_back(i);
  std::sort(newest.rbegin(), newest.rend());
  size_t bytes = 0, kept = 0;
  while (kept < newest.size() && kept < TuneCache::kKeepKeys &&
         bytes + lines[newest[kept]].size() + 1 <= static_cast<size_t>(TuneCache::kCompactBytes / 2))
    bytes += lines[newest[kept++]].size() + 1;
  std::string out = std::string(kHeader) + "\n";
  for (size_t j = kept; j-- > 0;) out += lines[newest[j]] + "\n";
  return out;
}

}  // namespace

std::string tune_key(const TuneContext& ctx, const GemmProblem& p, const PlanOptions& o, bool any_m,
                     const std::vector<Choice>& candidates) {
  uint64_t digest = 1469598103934665603ull;  // FNV-1a over the candidates' fields
  for (const Choice& c : candidates)
    for (int x : {static_cast<int>(c.impl), c.chunks, c.comm_sms, static_cast<int>(c.matmul)})
      for (int b = 0; b < 4; ++b) digest = (digest ^ ((static_cast<uint32_t>(x) >> (8 * b)) & 0xff)) * 1099511628211ull;
  std::string key =
      strfmt("%s sms=%d W=%d lsa=%d nccl=%d tpgemm=%s%s | %s alpha=%g beta=%g c=%d gathered_a=%d any_m=%d "
             "deterministic=%d chunks=%d comm_sms=%d matmul=%s",
             ctx.device.c_str(), ctx.topo.num_sms, ctx.topo.world, ctx.topo.all_lsa_peers ? 1 : 0, ctx.nccl_version,
             TPGEMM_VERSION_STRING, ctx.timing.c_str(), describe(p).c_str(), p.alpha, p.beta, p.has_c ? 1 : 0,
             o.return_gathered_a ? 1 : 0, any_m ? 1 : 0, o.deterministic ? 1 : 0, o.chunks_per_rank, o.comm_sms,
             std::string(to_string(o.matmul)).c_str());
  key += strfmt(" candidates=%zu:%016llx", candidates.size(), static_cast<unsigned long long>(digest));
  if (!ctx.settings.empty()) key += " settings:" + ctx.settings;  // (a schedule of their own)
  for (char& c : key)
    if (c == '\t' || c == '\n') c = ' ';
  return key;
}

std::string TuneCache::default_path() {
  if (const auto v = env_string("TPGEMM_TUNE_CACHE")) return *v == "off" ? std::string() : *v;
  if (const auto x = env_string("XDG_CACHE_HOME"); x && !x->empty()) return *x + "/tpgemm/tune-cache.txt";
  if (const auto h = env_string("HOME"); h && !h->empty()) return *h + "/.cache/tpgemm/tune-cache.txt";
  return {};
}

std::optional<Choice> TuneCache::find(const std::string& key, std::vector<std::string>& warnings) const {
  if (!enabled()) return std::nullopt;
  const LockedFile file(path_, O_RDONLY, LOCK_SH);
  if (file.fd() < 0) {
    if (errno != ENOENT)
      warnings.push_back(strfmt("tuning cache %s: cannot open it (%s); not used", path_.c_str(), std::strerror(errno)));
    return std::nullopt;  // none yet
  }
  // A writer that holds the lock past the wait is read around: a line it has half appended does
  // not parse, or differs only in its detail.
  const std::optional<std::string> text = read_all(file.fd());
  if (!text) {
    warnings.push_back(strfmt("tuning cache %s: cannot read it (%s); not used", path_.c_str(), std::strerror(errno)));
    return std::nullopt;
  }
  if (header_at_most(*text)) return std::nullopt;  // created by a store that has not written yet
  const std::string first = text->substr(0, text->find('\n'));
  if (first != kHeader) {
    const auto format = header_format(first);
    warnings.push_back(
        format && *format > kFormat
            ? strfmt("tuning cache %s: written by a newer tpgemm (format %lld, this one reads %d); not used and left "
                     "as it is (set TPGEMM_TUNE_CACHE to a path of this version's own)",
                     path_.c_str(), static_cast<long long>(*format), kFormat)
            : strfmt("tuning cache %s: not a tpgemm tuning cache of this format (expected the first line \"%s\"); "
                     "ignored (an older tpgemm's is started anew when a plan is next tuned)",
                     path_.c_str(), kHeader));
    return std::nullopt;
  }
  std::optional<Choice> found;
  int bad = 0;
  const auto skip = [&](std::string why) {
    if (++bad <= kLineWarnings) warnings.push_back(strfmt("tuning cache %s %s; skipped", path_.c_str(), why.c_str()));
  };
  const std::vector<std::string> lines = body_lines(*text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    const int number = static_cast<int>(i) + 2;
    if (line.empty() || line == kHeader) continue;
    const std::vector<std::string> f = split_tabs(line);
    if (f.size() != kFields) {
      skip(strfmt("line %d: %zu fields, expected %d", number, f.size(), kFields));
      continue;
    }
    if (f[0] != key) continue;
    const auto impl = parse_impl(f[1]);
    const auto chunks = parse_int(f[2]), sms = parse_int(f[3]);
    const auto matmul = parse_matmul(f[4]);
    if (!impl || *impl == Impl::kAuto || !chunks || *chunks < 1 || *chunks > 64 || !sms || *sms < 0 || *sms > 1024 ||
        !matmul || (*impl == Impl::kPipelinedCE) == (*matmul == Matmul::kAuto)) {
      skip(strfmt("line %d: impl \"%s\" chunks \"%s\" comm_sms \"%s\" matmul \"%s\" do not parse", number,
                  f[1].c_str(), f[2].c_str(), f[3].c_str(), f[4].c_str()));
      continue;
    }
    found = Choice{*impl, static_cast<int>(*chunks), static_cast<int>(*sms), *matmul};
  }
  if (bad > kLineWarnings)
    warnings.push_back(strfmt("tuning cache %s: %d more lines skipped", path_.c_str(), bad - kLineWarnings));
  return found;
}

void TuneCache::store(const std::string& key, const Choice& c, const std::string& detail,
                      std::vector<std::string>& warnings) const {
  if (!enabled()) return;
  std::string clean = detail;
  for (char& ch : clean)
    if (ch == '\t' || ch == '\n') ch = ' ';
  const std::string line = strfmt("%s\t%s\t%d\t%d\t%s\t%s\n", key.c_str(), std::string(to_string(c.impl)).c_str(),
                                  c.chunks, c.comm_sms, std::string(to_string(c.matmul)).c_str(), clean.c_str());
  const auto not_kept = [&](const std::string& why) {
    warnings.push_back(strfmt("tuning cache %s: %s; the choice is not kept", path_.c_str(), why.c_str()));
  };
  if (!make_parent_dirs(path_)) return not_kept(strfmt("cannot make its directory (%s)", std::strerror(errno)));
  // A rewrite by another process (a rename) between this one's open and its lock is seen and the
  // file opened again; more than a few in a row would be a fight not worth winning.
  for (int attempt = 0; attempt < 10; ++attempt) {
    const LockedFile file(path_, O_RDWR | O_CREAT | O_APPEND, LOCK_EX);
    if (file.fd() < 0) return not_kept(strfmt("cannot open it for writing (%s)", std::strerror(errno)));
    if (file.timed_out())
      return not_kept(strfmt("another process held its lock for %d ms", kLockWaitMs));
    if (!file.still_at(path_)) continue;
    const std::optional<std::string> text = read_all(file.fd());
    if (!text) return not_kept(strfmt("cannot read it (%s)", std::strerror(errno)));
    std::string why;
    if (header_at_most(*text)) {  // (a cut header is written again, under the lock)
      if ((!text->empty() && ::ftruncate(file.fd(), 0) != 0) || !write_all(file.fd(), std::string(kHeader) + "\n" + line))
        not_kept(strfmt("cannot write it (%s)", std::strerror(errno)));
      return;
    }
    struct stat st {};
    const mode_t mode = ::fstat(file.fd(), &st) == 0 ? st.st_mode : 0644;
    const std::string first = text->substr(0, text->find('\n'));
    if (first != kHeader) {
      const auto format = header_format(first);
      if (!format) return not_kept("not a tpgemm tuning cache, left as it is");
      if (*format > kFormat) return not_kept(strfmt("written by a newer tpgemm (format %lld), left as it is",
                                                    static_cast<long long>(*format)));
      // An older tpgemm's: replaced whole by one of this format.
      if (!replace_file(path_, std::string(kHeader) + "\n" + line, mode, why))
        not_kept(strfmt("cannot replace the file of an older format (%s)", why.c_str()));
      return;
    }
    if (static_cast<long>(text->size()) > kCompactBytes) {
      std::vector<std::string> lines = body_lines(*text);
      lines.push_back(line.substr(0, line.size() - 1));
      if (replace_file(path_, compacted(lines), mode, why)) return;
      // (a directory this process cannot write in: the file grows instead)
    }
    // A last line left without its newline (a process that died mid-write, a full disk) is ended
    // first, so that this one is not joined to it. One write: whole lines.
    const std::string out = (text->back() == '\n' ? "" : "\n") + line;
    if (!write_all(file.fd(), out)) not_kept(strfmt("cannot write it (%s)", std::strerror(errno)));
    return;
  }
  not_kept("it was rewritten by other processes while this one waited");
}

}  // namespace tpgemm::plan
