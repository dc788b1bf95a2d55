// Issue 39's questions before any product code: can four processes sharing one GPU each see the
// four ranks' score receive buffers as ONE contiguous [heads, rows, W] array (so score_decode's
// stores, unchanged, land in the owners' memory), and can they order their steps on the device,
// graph-captured, with back-pressure and a bounded wait for a rank that died?
//
// Set-up: the parent makes a socketpair per pair of ranks, then forks RANKS children (no CUDA
// before the fork). Each rank allocates its receive buffer with the CUDA driver's virtual memory
// API (cuMemCreate, shareable as a POSIX file descriptor), sends the descriptor to every peer
// over its socket (SCM_RIGHTS), imports the peers', and maps all four allocations back to back in
// one reserved address range: head h's slice lies in rank h's memory. A control page at the end of
// each allocation holds `ready[s]` (peer s finished pushing step e into this rank) and
// `consumed[s]` (peer s finished reading its own slice of step e).
//
// A step on rank r's stream, every epoch read from device memory so the step captures as a graph:
//   1. wait until every peer consumed the previous step (back-pressure: its slice may be written)
//   2. push: the scores of blocks b % RANKS == r, every head and row, into the contiguous array
//   3. signal: a system-scope release, then ready[r] = e in every peer's control page
//   4. wait until ready[s] >= e for every peer s
//   5. consume: check the own slice (head r) holds step e's values from every rank
//   6. consumed[r] = e in every peer's control page; the epoch advances
// Waits spin on %globaltimer and give up after TIMEOUT_MS, raising an error word (a dead peer is
// reported, not a hang). Modes: `eager` and `graph` (the same step captured once, replayed),
// `die` (rank RANKS-1 exits after 3 steps; the others must report the timeout), and `memops`,
// `memops-graph`: the order kept by the driver's stream memory operations (queueMemopStep).
//
// Usage: ipc_push_probe [STEPS] [ROWS] [W] [TIMEOUT_MS]   (built and run by bench/gpu.sh ipc)
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int kRanks = 4;

#define CU(x)                                                                                              \
  do {                                                                                                     \
    CUresult r_ = (x);                                                                                     \
    if (r_ != CUDA_SUCCESS) {                                                                              \
      const char *s_ = nullptr;                                                                            \
      cuGetErrorString(r_, &s_);                                                                           \
      std::fprintf(stderr, "rank %d: %s: %s (line %d)\n", g_rank, #x, s_ ? s_ : "?", __LINE__);           \
      std::exit(3);                                                                                        \
    }                                                                                                      \
  } while (0)
#define RT(x)                                                                                              \
  do {                                                                                                     \
    cudaError_t e_ = (x);                                                                                  \
    if (e_ != cudaSuccess) {                                                                               \
      std::fprintf(stderr, "rank %d: %s: %s (line %d)\n", g_rank, #x, cudaGetErrorString(e_), __LINE__);  \
      std::exit(3);                                                                                        \
    }                                                                                                      \
  } while (0)

int g_rank = -1;

struct Control { // at the end of each rank's allocation
  unsigned ready[kRanks];
  unsigned consumed[kRanks];
};

struct Step {
  float *scores;          // [kRanks heads, headRows, W], head h in rank h's memory
  Control *control[kRanks]; // each rank's control page, through this rank's mapping
  unsigned *epoch;        // this rank's step counter (local memory)
  unsigned *error;        // bit 0: a wait timed out; bit 1: a consumed value was wrong
  unsigned long long *badValues;
  int rank, rows, headRows, width; // rows used of each head's headRows
  unsigned long long timeoutNs;
};

__device__ unsigned long long nowNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ unsigned loadAcquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ void storeRelease(unsigned *p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Spins until word(s) >= target for every peer s, or the timeout; one thread.
template <bool Consumed> __global__ void waitPeers(Step s) {
  if (*s.error & 1u) // a peer is gone: later steps do not wait for it again
    return;
  const unsigned e = *s.epoch;
  const unsigned target = Consumed ? e - 1 : e;
  const unsigned long long start = nowNs();
  for (int p = 0; p < kRanks; ++p) {
    if (p == s.rank)
      continue;
    const unsigned *w = Consumed ? &s.control[s.rank]->consumed[p] : &s.control[s.rank]->ready[p];
    while (loadAcquire(w) < target) {
      if (nowNs() - start > s.timeoutNs) {
        atomicOr(s.error, 1u);
        return;
      }
    }
  }
}

__device__ float valueOf(unsigned e, int head, int row, int block) {
  return float((e * 2654435761u) ^ (head * 40503u) ^ (row * 977u) ^ unsigned(block)) * 0.25f;
}

// This rank's blocks (b % kRanks == rank) of every head and row.
__global__ void push(Step s) {
  const unsigned e = *s.epoch;
  const int per = (s.width + kRanks - 1 - s.rank) / kRanks;
  const long total = long(kRanks) * s.rows * per;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < total; i += long(gridDim.x) * blockDim.x) {
    const int j = int(i % per), row = int(i / per % s.rows), head = int(i / per / s.rows);
    const int b = j * kRanks + s.rank;
    s.scores[(long(head) * s.headRows + row) * s.width + b] = valueOf(e, head, row, b);
  }
}

// After this rank's pushes: ready[rank] = e in every rank's control page (system-scope release:
// the pushes into peers' memory are visible before the flag).
__global__ void signalReady(Step s) {
  __threadfence_system();
  for (int p = 0; p < kRanks; ++p)
    if (p != s.rank)
      storeRelease(&s.control[p]->ready[s.rank], *s.epoch);
}

__global__ void consume(Step s) {
  const unsigned e = *s.epoch;
  const long total = long(s.rows) * s.width;
  const float *mine = s.scores + long(s.rank) * s.headRows * s.width;
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < total; i += long(gridDim.x) * blockDim.x) {
    const int row = int(i / s.width), b = int(i % s.width);
    if (mine[i] != valueOf(e, s.rank, row, b)) {
      atomicOr(s.error, 2u);
      atomicAdd(s.badValues, 1ull);
    }
  }
}

__global__ void signalConsumed(Step s) {
  __threadfence_system();
  for (int p = 0; p < kRanks; ++p)
    if (p != s.rank)
      storeRelease(&s.control[p]->consumed[s.rank], *s.epoch);
  *s.epoch += 1;
}

__global__ void advanceEpoch(Step s) { *s.epoch += 1; }

// The same step ordered by the driver's stream memory operations instead of spinning kernels.
// Their values are fixed when a graph captures them, so the words are set and reset rather than
// counted: consumed[p] starts at 1 and ready[p] at 0; a rank takes a peer's 1 and puts back 0
// before it signals anything that lets that peer set it again (no timeout: a dead peer blocks).
void queueMemopStep(const Step &s, cudaStream_t st, int sms) {
  CUstream cs = reinterpret_cast<CUstream>(st);
  auto word = [](const unsigned *p) { return reinterpret_cast<CUdeviceptr>(p); };
  for (int p = 0; p < kRanks; ++p)
    if (p != s.rank) {
      CU(cuStreamWaitValue32(cs, word(&s.control[s.rank]->consumed[p]), 1, CU_STREAM_WAIT_VALUE_EQ));
      CU(cuStreamWriteValue32(cs, word(&s.control[s.rank]->consumed[p]), 0, CU_STREAM_WRITE_VALUE_DEFAULT));
    }
  push<<<sms * 4, 256, 0, st>>>(s);
  for (int p = 0; p < kRanks; ++p)
    if (p != s.rank)
      CU(cuStreamWriteValue32(cs, word(&s.control[p]->ready[s.rank]), 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  for (int p = 0; p < kRanks; ++p)
    if (p != s.rank) {
      CU(cuStreamWaitValue32(cs, word(&s.control[s.rank]->ready[p]), 1, CU_STREAM_WAIT_VALUE_EQ));
      CU(cuStreamWriteValue32(cs, word(&s.control[s.rank]->ready[p]), 0, CU_STREAM_WRITE_VALUE_DEFAULT));
    }
  consume<<<sms * 4, 256, 0, st>>>(s);
  for (int p = 0; p < kRanks; ++p)
    if (p != s.rank)
      CU(cuStreamWriteValue32(cs, word(&s.control[p]->consumed[s.rank]), 1, CU_STREAM_WRITE_VALUE_DEFAULT));
  advanceEpoch<<<1, 1, 0, st>>>(s);
}

void queueStep(const Step &s, cudaStream_t st, int sms) {
  waitPeers<true><<<1, 1, 0, st>>>(s);
  push<<<sms * 4, 256, 0, st>>>(s);
  signalReady<<<1, 1, 0, st>>>(s);
  waitPeers<false><<<1, 1, 0, st>>>(s);
  consume<<<sms * 4, 256, 0, st>>>(s);
  signalConsumed<<<1, 1, 0, st>>>(s);
}

void sendFd(int sock, int fd) {
  char byte = 0;
  iovec io{&byte, 1};
  char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof(ctrl);
  cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (sendmsg(sock, &m, 0) != 1) {
    std::perror("sendmsg");
    std::exit(4);
  }
}

int recvFd(int sock) {
  char byte;
  iovec io{&byte, 1};
  char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof(ctrl);
  if (recvmsg(sock, &m, 0) != 1) {
    std::perror("recvmsg");
    std::exit(4);
  }
  int fd;
  std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
  return fd;
}

int runRank(int rank, int socks[kRanks], int steps, int rows, int width, int timeoutMs, const char *mode) {
  g_rank = rank;
  RT(cudaSetDevice(0));
  RT(cudaFree(nullptr));
  CUdevice dev;
  CU(cuDeviceGet(&dev, 0));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  // Head h's rows fill the front of rank h's allocation, its control page the last row's place:
  // the array's head stride is the allocation (headRows rows of W floats; W x 4 divides it).
  const size_t rowBytes = size_t(width) * sizeof(float);
  const size_t size = ((rows + 1) * rowBytes + gran - 1) / gran * gran;
  if (gran % rowBytes != 0 && rowBytes % gran != 0) {
    std::fprintf(stderr, "W x 4 = %zu bytes must divide the granularity %zu or be a multiple of it\n", rowBytes, gran);
    return 5;
  }
  CUmemGenericAllocationHandle own, handles[kRanks];
  CU(cuMemCreate(&own, size, &prop, 0));
  int ownFd = -1;
  CU(cuMemExportToShareableHandle(&ownFd, own, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  // Ranks send in rank order and receive from lower ranks first: no two wait on each other.
  for (int p = 0; p < kRanks; ++p) {
    if (p == rank) {
      handles[p] = own;
      continue;
    }
    int fd;
    if (p < rank) {
      fd = recvFd(socks[p]);
      sendFd(socks[p], ownFd);
    } else {
      sendFd(socks[p], ownFd);
      fd = recvFd(socks[p]);
    }
    CU(cuMemImportFromShareableHandle(&handles[p], reinterpret_cast<void *>(static_cast<uintptr_t>(fd)),
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
  }
  CUdeviceptr va;
  CU(cuMemAddressReserve(&va, size * kRanks, 0, 0, 0));
  for (int p = 0; p < kRanks; ++p)
    CU(cuMemMap(va + p * size, size, 0, handles[p], 0));
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(va, size * kRanks, &access, 1));
  Step s{};
  s.rank = rank;
  s.rows = rows;
  s.headRows = int(size / rowBytes);
  s.width = width;
  s.timeoutNs = static_cast<unsigned long long>(timeoutMs) * 1000000ull;
  s.scores = reinterpret_cast<float *>(va);
  for (int p = 0; p < kRanks; ++p)
    s.control[p] = reinterpret_cast<Control *>(va + p * size + size - sizeof(Control));
  RT(cudaMemset(s.control[rank], 0, sizeof(Control)));
  const bool memops = std::strncmp(mode, "memops", 6) == 0;
  if (memops) // every peer's slice starts free
    CU(cuMemsetD32(reinterpret_cast<CUdeviceptr>(s.control[rank]->consumed), 1, kRanks));
  unsigned *words;
  RT(cudaMalloc(&words, 64));
  RT(cudaMemset(words, 0, 64));
  const unsigned one = 1;
  RT(cudaMemcpy(words, &one, 4, cudaMemcpyHostToDevice));
  s.epoch = words;
  s.error = words + 1;
  s.badValues = reinterpret_cast<unsigned long long *>(words + 2);
  int sms = 0;
  RT(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t st;
  RT(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  RT(cudaDeviceSynchronize());
  // every rank's control page is zeroed before any rank's first step
  char b = 0;
  for (int p = 0; p < kRanks; ++p)
    if (p != rank && write(socks[p], &b, 1) != 1)
      return 6;
  for (int p = 0; p < kRanks; ++p)
    if (p != rank && read(socks[p], &b, 1) != 1)
      return 6;

  const bool graph = std::strstr(mode, "graph") != nullptr, die = std::strcmp(mode, "die") == 0;
  auto queue = [&] { memops ? queueMemopStep(s, st, sms) : queueStep(s, st, sms); };
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    RT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    queue();
    RT(cudaStreamEndCapture(st, &g));
    RT(cudaGraphInstantiate(&exec, g, 0));
  }
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0;
  for (; done < steps; ++done) {
    if (die && rank == kRanks - 1 && done == 3) {
      RT(cudaStreamSynchronize(st));
      std::printf("rank %d: exits after %d steps\n", rank, done);
      std::fflush(stdout);
      _exit(0);
    }
    if (graph)
      RT(cudaGraphLaunch(exec, st));
    else
      queue();
  }
  RT(cudaStreamSynchronize(st));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  unsigned host[4];
  RT(cudaMemcpy(host, words, 16, cudaMemcpyDeviceToHost));
  unsigned long long bad = 0;
  std::memcpy(&bad, host + 2, 8);
  std::printf("rank %d %-5s: %d steps of %d rows x %d blocks x %d heads in %.1f ms (%.1f us a step), epoch %u, "
              "error word %u (%s), %llu wrong values\n",
              rank, mode, done, s.rows, width, kRanks, ms, 1e3 * ms / done, host[0], host[1],
              host[1] & 1 ? "a wait timed out" : "ok", bad);
  return host[1] == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
  const int rows = argc > 2 ? std::atoi(argv[2]) : 1024;
  const int width = argc > 3 ? std::atoi(argv[3]) : 8192;
  const int timeoutMs = argc > 4 ? std::atoi(argv[4]) : 2000;
  for (const char *mode : {"eager", "graph", "die", "memops", "memops-graph"}) {
    int sp[kRanks][kRanks];
    for (int i = 0; i < kRanks; ++i)
      for (int j = i + 1; j < kRanks; ++j) {
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) {
          std::perror("socketpair");
          return 2;
        }
        sp[i][j] = pair[0];
        sp[j][i] = pair[1];
      }
    std::vector<pid_t> kids;
    for (int r = 0; r < kRanks; ++r) {
      pid_t pid = fork();
      if (pid == 0) {
        int socks[kRanks];
        for (int p = 0; p < kRanks; ++p)
          socks[p] = p == r ? -1 : sp[r][p];
        const int rc = runRank(r, socks, steps, rows, width, timeoutMs, mode);
        std::fflush(stdout); // _exit flushes nothing
        _exit(rc);
      }
      kids.push_back(pid);
    }
    for (int i = 0; i < kRanks; ++i)
      for (int j = 0; j < kRanks; ++j)
        if (i != j)
          close(sp[i][j]);
    const auto t0 = std::chrono::steady_clock::now();
    // A rank stuck past the deadline (a stream waiting on a word no one will write) is killed.
    int failed = 0, killed = 0;
    for (pid_t k : kids) {
      int status = 0;
      while (waitpid(k, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) {
          kill(k, SIGKILL);
          waitpid(k, &status, 0);
          ++killed;
          break;
        }
        usleep(1000);
      }
      failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("mode %s: %d of %d ranks failed (%d killed at the deadline), all ended after %.2f s\n", mode, failed,
                kRanks, killed, s);
    std::fflush(stdout);
  }
  return 0;
}
