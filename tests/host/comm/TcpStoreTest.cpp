// make_tcp_store (TcpStore.hpp): c10d's TCPStore with the server backend
// chosen at run time, so that a LibTorch built without libuv (Debian 13's
// 2.6, whose TCPStore asks for libuv by default) still rendezvouses. Each
// test asserts what this LibTorch can do: the classic backend everywhere,
// libuv where the LibTorch has it (a pip wheel) and a clear refusal of
// USE_LIBUV=1 where it has not.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "abi/HostError.hpp"
#include "comm/TcpStore.hpp"

namespace rh::comm {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// USE_LIBUV set (or unset) while it lives, restored after.
class UseLibuv {
 public:
  explicit UseLibuv(const char* value) {
    if (const char* old = std::getenv("USE_LIBUV")) old_ = old;
    if (value)
      setenv("USE_LIBUV", value, 1);
    else
      unsetenv("USE_LIBUV");
  }
  ~UseLibuv() {
    if (old_)
      setenv("USE_LIBUV", old_->c_str(), 1);
    else
      unsetenv("USE_LIBUV");
  }
  UseLibuv(const UseLibuv&) = delete;
  UseLibuv& operator=(const UseLibuv&) = delete;

 private:
  std::optional<std::string> old_;
};

c10d::TCPStoreOptions options(bool server, int port) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = server;
  o.waitWorkers = false;
  o.timeout = std::chrono::seconds(20);
  return o;
}

// A server of this process and a client of its own backend choice
// exchange a key both ways.
void expect_round_trip(c10d::TCPStore& server) {
  auto client = make_tcp_store("127.0.0.1", options(false, server.getPort()));
  client->set("from_client", std::vector<uint8_t>{1, 2, 3});
  EXPECT_EQ(server.get("from_client"), (std::vector<uint8_t>{1, 2, 3}));
  server.set("from_server", std::vector<uint8_t>{4});
  EXPECT_EQ(client->get("from_server"), std::vector<uint8_t>{4});
}

// TCPStoreOptions::useLibUV from 2.1, TCPStore::isLibUvBackend from 2.3.
constexpr bool kHasLibuvOption = TORCH_VERSION_MAJOR > 2 ||
                                 (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
bool is_libuv(const c10d::TCPStore& s) { return s.isLibUvBackend(); }
#else
bool is_libuv(const c10d::TCPStore&) { return false; }
#endif

TEST(TcpStoreTest, UseLibuvZeroServesWithTheClassicBackend) {
  UseLibuv env("0");
  std::string backend;
  auto server = make_tcp_store("127.0.0.1", options(true, 0), &backend);
  EXPECT_EQ(backend, kHasLibuvOption ? "classic (USE_LIBUV=0)"
                                     : "classic (LibTorch " TORCH_VERSION " has no other)");
  EXPECT_FALSE(is_libuv(*server));
  expect_round_trip(*server);
}

// Unset: libuv where the LibTorch has it, else the classic backend, said
// so; USE_LIBUV=1 then works, or is refused naming the variable and the fix.
TEST(TcpStoreTest, ByDefaultLibuvWhereThisLibTorchHasItElseClassic) {
  UseLibuv env(nullptr);
  std::string backend;
  auto server = make_tcp_store("127.0.0.1", options(true, 0), &backend);
  expect_round_trip(*server);
  if (!kHasLibuvOption) {
    EXPECT_EQ(backend, "classic (LibTorch " TORCH_VERSION " has no other)");
    return;
  }
  UseLibuv asked("1");
  if (backend == "libuv") {
    if (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 3) {
      EXPECT_TRUE(is_libuv(*server));
    }
    std::string again;
    auto libuv = make_tcp_store("127.0.0.1", options(true, 0), &again);
    EXPECT_EQ(again, "libuv");
    expect_round_trip(*libuv);
    return;
  }
  EXPECT_EQ(backend, "classic (this LibTorch " TORCH_VERSION " was built without libuv)");
  EXPECT_FALSE(is_libuv(*server));
  try {
    make_tcp_store("127.0.0.1", options(true, 0));
    FAIL() << "USE_LIBUV=1 without libuv must be refused";
  } catch (const host::HostError& e) {
    EXPECT_THAT(
        e.what(),
        HasSubstr("USE_LIBUV=1 asks for c10d's libuv store, but this LibTorch (" TORCH_VERSION
                  ") was built without libuv: unset USE_LIBUV, or set USE_LIBUV=0"));
  }
}

// A store whose host goes silent (SIGSTOP: no reset, no answer, as a link
// that went down) fails the next request within the request timeout, on
// every LibTorch: 2.x's client sets no timeout of its own, and a request
// then never returned. The store is another process's, so that stopping it
// stops only the server.
TEST(TcpStoreTest, ARequestToASilentStoreFailsWithinTheRequestTimeout) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    try {
      auto server = make_tcp_store("127.0.0.1", options(true, 0));
      const int port = server->getPort();
      if (::write(fds[1], &port, sizeof port) != sizeof port) ::_exit(1);
      ::pause();
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(fds[1]);
  int port = 0;
  ASSERT_EQ(::read(fds[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  ::close(fds[0]);
  auto client = make_tcp_store("127.0.0.1", options(false, port), nullptr, std::chrono::seconds(1));
  client->set("alive", std::vector<uint8_t>{1});
  EXPECT_TRUE(client->check({"alive"}));
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  // kill() returns before the stop takes effect: wait until the child is
  // stopped, or its store may still answer (seen under a loaded CI run).
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));
  const auto start = std::chrono::steady_clock::now();
  // Asked on a thread of its own, so that a request that never returns
  // fails this test instead of hanging it (killing the server then ends
  // the request: its socket is reset).
  auto asked = std::async(std::launch::async, [&] {
    try {
      client->check({"alive"});
      return std::string("answered");
    } catch (const std::exception& e) {
      return std::string("failed: ") + e.what();
    }
  });
  const bool done = asked.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(done) << "a request to a silent store did not return within 30 s";
  EXPECT_THAT(asked.get(), StartsWith("failed: "));
  // 1 s of silence, then the error: well under the 30 s of a hang's bound.
  EXPECT_LT(waited, 15.0);
}

}  // namespace
}  // namespace rh::comm
