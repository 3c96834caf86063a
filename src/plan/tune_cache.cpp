#include "plan/tune_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/env.h"
#include "core/format.h"
#include "tpgemm/version.h"

namespace tpgemm::plan {
namespace {

// Format 2 added the matmul field; a file of another format is started anew by the next store.
constexpr const char* kHeader = "tpgemm-tune-cache 2";
constexpr int kFields = 6;  // key, impl, chunks, comm_sms, matmul, detail

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

}  // namespace

std::string tune_key(const TuneContext& ctx, const GemmProblem& p, bool gathered_a, bool any_m, bool deterministic) {
  std::string device = ctx.device;
  for (char& c : device)
    if (c == '\t' || c == '\n') c = ' ';
  return strfmt("%s sms=%d W=%d lsa=%d nccl=%d tpgemm=%s | %s alpha=%g beta=%g c=%d gathered_a=%d any_m=%d",
                device.c_str(), ctx.topo.num_sms, ctx.topo.world, ctx.topo.all_lsa_peers ? 1 : 0, ctx.nccl_version,
                TPGEMM_VERSION_STRING, describe(p).c_str(), p.alpha, p.beta, p.has_c ? 1 : 0, gathered_a ? 1 : 0, any_m ? 1 : 0) +
         (deterministic ? " deterministic=1" : "") +  // (its candidates are fewer; older keys stay valid)
         (ctx.settings.empty() ? std::string() : " settings:" + ctx.settings);  // (a schedule of their own)
}

std::string TuneCache::default_path() {
  if (const auto v = env_string("TPGEMM_TUNE_CACHE")) return *v == "off" ? std::string() : *v;
  if (const auto x = env_string("XDG_CACHE_HOME"); x && !x->empty()) return *x + "/tpgemm/tune-cache.txt";
  if (const auto h = env_string("HOME"); h && !h->empty()) return *h + "/.cache/tpgemm/tune-cache.txt";
  return {};
}

std::optional<Choice> TuneCache::find(const std::string& key, std::vector<std::string>& warnings) const {
  if (!enabled()) return std::nullopt;
  std::ifstream in(path_);
  if (!in) return std::nullopt;  // none yet
  std::string line;
  if (!std::getline(in, line) || line != kHeader) {
    warnings.push_back(strfmt("tuning cache %s: not a tpgemm tuning cache of this format (expected the first line "
                              "\"%s\"); ignored (an older tpgemm's is started anew when a plan is next tuned)",
                              path_.c_str(), kHeader));
    return std::nullopt;
  }
  std::optional<Choice> found;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty() || line == kHeader) continue;
    const std::vector<std::string> f = split_tabs(line);
    if (f.size() != kFields) {
      warnings.push_back(strfmt("tuning cache %s line %d: %zu fields, expected %d; skipped", path_.c_str(), number,
                                f.size(), kFields));
      continue;
    }
    if (f[0] != key) continue;
    const auto impl = parse_impl(f[1]);
    const auto chunks = parse_int(f[2]), sms = parse_int(f[3]);
    const auto matmul = parse_matmul(f[4]);
    if (!impl || *impl == Impl::kAuto || !chunks || *chunks < 1 || *chunks > 64 || !sms || *sms < 0 || *sms > 1024 ||
        !matmul || (*impl == Impl::kPipelinedCE) == (*matmul == Matmul::kAuto)) {
      warnings.push_back(strfmt("tuning cache %s line %d: impl \"%s\" chunks \"%s\" comm_sms \"%s\" matmul \"%s\" do not "
                                "parse; skipped",
                                path_.c_str(), number, f[1].c_str(), f[2].c_str(), f[3].c_str(), f[4].c_str()));
      continue;
    }
    found = Choice{*impl, static_cast<int>(*chunks), static_cast<int>(*sms), *matmul};
  }
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
  // A tuning cache of another tpgemm's format is replaced whole by one of this format (a rename,
  // so that no reader sees half of it); any other file is left alone.
  std::string first;
  if (std::ifstream in(path_); in && std::getline(in, first) && first != kHeader) {
    if (first.rfind("tpgemm-tune-cache ", 0) != 0) {
      warnings.push_back(strfmt("tuning cache %s: not a tpgemm tuning cache; left as it is, and the choice is not kept",
                                path_.c_str()));
      return;
    }
    const std::string tmp = strfmt("%s.%d.tmp", path_.c_str(), static_cast<int>(::getpid()));
    std::ofstream out(tmp, std::ios::trunc);
    out << kHeader << "\n" << line;
    out.close();
    if (!out || std::rename(tmp.c_str(), path_.c_str()) != 0) {
      warnings.push_back(strfmt("tuning cache %s: cannot replace the file of another format (%s); the choice is not kept",
                                path_.c_str(), std::strerror(errno)));
      std::remove(tmp.c_str());
    }
    return;
  }
  const int fd = make_parent_dirs(path_) ? ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644) : -1;
  if (fd < 0) {
    warnings.push_back(strfmt("tuning cache %s: cannot open it for writing (%s); the choice is not kept",
                              path_.c_str(), std::strerror(errno)));
    return;
  }
  struct stat st {};
  std::string out = line;
  if (::fstat(fd, &st) == 0 && st.st_size == 0) out = std::string(kHeader) + "\n" + line;
  // One write: appends of whole lines do not interleave.
  const ssize_t n = ::write(fd, out.data(), out.size());
  if (n != static_cast<ssize_t>(out.size()))
    warnings.push_back(strfmt("tuning cache %s: short write (%s)", path_.c_str(), n < 0 ? std::strerror(errno) : "disk full?"));
  ::close(fd);
}

}  // namespace tpgemm::plan
